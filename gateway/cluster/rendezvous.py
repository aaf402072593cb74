"""Rendezvous (highest random weight) hashing: the owner of a device among the live members.

Every gateway computes the same owner from the same member list without talking to the others,
and a member joining or leaving moves only the devices whose top choice it is (about 1/N).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable


def weight(member: str, device_id: str) -> bytes:
    return hashlib.sha256(f"{member}/{device_id}".encode()).digest()


def owner(device_id: str, members: Iterable[str]) -> str | None:
    """The member with the highest sha256(member + "/" + device); None when there are none."""
    return max(members, key=lambda member: weight(member, device_id), default=None)
