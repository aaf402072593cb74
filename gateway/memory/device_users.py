"""Whose memory a device's conversation uses: the user `memory.users` maps it to, else a user
of its own, so a device nobody mapped (an openly enrolled one) never reads, or answers with,
another person's memories ("What is my name?" from a new box knows no name)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator, Mapping

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


class DevicePeople(Mapping[str, str]):
    """The live device id -> person mapping: gateway.yaml's `memory.users` with the console's
    changes over it (the PeopleStore, gateway/devices/people.py). One object shared by
    the memory (whose memory a device uses), the brain (whose conversation history), the rule
    engine (which devices speak a person's alerts) and the console; changed on the event loop.
    A change holds from the next turn or reading on: the device then reads and writes that
    person's memory and continues that person's conversation."""

    def __init__(self, configured: Mapping[str, str]) -> None:
        self.configured = dict(configured)
        self._changed: dict[str, str] = {}  # device id -> person, "" = its own memory
        self.changes = 0  # counts set/reset (a shared store's reader skips a read that overlapped one)

    def load(self, changed: Mapping[str, str]) -> None:
        """The console's stored changes (at start; with a shared store, again every few seconds)."""
        self._changed = dict(changed)

    def set(self, device_id: str, person: str) -> None:
        """`person` "" = the device's own memory, whatever gateway.yaml says."""
        self._changed[device_id] = person
        self.changes += 1

    def reset(self, device_id: str) -> None:
        """Back to gateway.yaml's mapping."""
        self._changed.pop(device_id, None)
        self.changes += 1

    def source(self, device_id: str) -> str:
        """Where the device's person comes from: "console", "gateway.yaml" or "own"."""
        if device_id in self._changed:
            return "console"
        return "gateway.yaml" if device_id in self.configured else "own"

    def _merged(self) -> dict[str, str]:
        merged = {**self.configured, **self._changed}
        return {d: p for d, p in merged.items() if p}

    def __getitem__(self, device_id: str) -> str:
        person = self._changed.get(device_id, self.configured.get(device_id, ""))
        if not person:
            raise KeyError(device_id)
        return person

    def __iter__(self) -> Iterator[str]:
        return iter(self._merged())

    def __len__(self) -> int:
        return len(self._merged())

