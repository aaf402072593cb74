"""Whose memory a device's conversation uses: the user `memory.users` maps it to, else a user
of its own, so a device nobody mapped (an openly enrolled one) never reads, or answers with,
another person's memories ("What is my name?" from a new box knows no name)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping

_USER = re.compile(r"^[A-Za-z0-9_.@-]{1,64}$")  # the memory's user id format (node_input.check_user)
PREFIX = "device."


def device_user(device_id: str) -> str:
    """`device.<id>`; an id the user format cannot hold (a `:`, too long) is hashed instead."""
    user = f"{PREFIX}{device_id}"
    if _USER.match(user):
        return user
    return f"{PREFIX}{hashlib.sha256(device_id.encode()).hexdigest()[:32]}"


def user_of(device_id: str, users: Mapping[str, str], default_user: str, isolate_by_user: bool) -> str:
    """The mapped user; else, with isolate_by_user, the device's own; else the shared default."""
    if not isolate_by_user:
        return default_user
    return users.get(device_id) or device_user(device_id)
