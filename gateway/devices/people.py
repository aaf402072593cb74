"""Which person a device belongs to, as set from the console: the `device_people` table. A row
overrides `memory.users` of gateway.yaml for its device; an empty person means "its own memory"
(`device.<id>`) even when gateway.yaml maps it. The live mapping the gateway uses is `DevicePeople`
(gateway/memory/device_users.py), loaded from the store at start.

The store is a `PeopleStore`: the devices database on a single box (`SqlitePeople`), PostgreSQL
when several gateways share it (gateway/storage/people.py). With a shared store every gateway
re-reads it every `FOLLOW_S` (`follow`), so a device mapped from one gateway's console belongs to
that person on every gateway from then on (within that interval).
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from typing import Protocol

from gateway.devices.database import Database
from gateway.memory.device_users import DevicePeople

log = logging.getLogger(__name__)
FOLLOW_S = 2.0  # how often a gateway re-reads a shared store's mapping


def load_people(conn: sqlite3.Connection) -> dict[str, str]:
    """device id -> person ("" = its own memory) for every device the console mapped."""
    return dict(conn.execute("SELECT device_id, person FROM device_people ORDER BY device_id"))


def set_person(conn: sqlite3.Connection, device_id: str, person: str, now: float) -> None:
    conn.execute("INSERT INTO device_people(device_id, person, updated_at) VALUES (?, ?, ?) "
                 "ON CONFLICT(device_id) DO UPDATE SET person = excluded.person, updated_at = excluded.updated_at",
                 (device_id, person, now))


def clear_person(conn: sqlite3.Connection, device_id: str) -> bool:
    """Back to gateway.yaml's mapping; False when the console had not mapped the device."""
    return conn.execute("DELETE FROM device_people WHERE device_id = ?", (device_id,)).rowcount == 1


class PeopleStore(Protocol):
    async def load(self) -> dict[str, str]:
        """device id -> person ("" = its own memory) for every device the console mapped."""
        ...

    async def set(self, device_id: str, person: str, now: float) -> None: ...

    async def clear(self, device_id: str) -> bool:
        """Back to gateway.yaml's mapping; False when the console had not mapped the device."""
        ...


class SqlitePeople:
    """The PeopleStore in the gateway's devices database."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def load(self) -> dict[str, str]:
        return await self._db.run(load_people)

    async def set(self, device_id: str, person: str, now: float) -> None:
        await self._db.run(set_person, device_id, person, now)

    async def clear(self, device_id: str) -> bool:
        return await self._db.run(clear_person, device_id)


async def follow(store: PeopleStore, people: DevicePeople, interval_s: float = FOLLOW_S) -> None:
    """Keep `people` equal to a shared store's mapping (the other gateways' consoles change it);
    a read that fails is logged once per outage and retried, the last mapping stays in use."""
    failing = False
    while True:
        await asyncio.sleep(interval_s)
        changes = people.changes
        try:
            stored = await store.load()
        except Exception as exc:  # noqa: BLE001 - the store is unreachable: keep the mapping we have
            if not failing:
                log.warning("people: the shared device -> person mapping not read (%s); the last one stays in use",
                            " ".join(str(exc).split()) or type(exc).__name__)
            failing = True
            continue
        if failing:
            log.info("people: the shared device -> person mapping is read again")
        failing = False
        if people.changes == changes:  # else this console changed it meanwhile: read again next time
            people.load(stored)
