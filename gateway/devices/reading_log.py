"""The readings table read in row order: what the memory's feed turns into memories.

Row ids grow with every stored reading and are never reused (the retention always keeps the
newest row, see retention.py), so "everything after id N" is a complete, replayable log: the
memory keeps N with its memories (gateway/memory/reading_feed.py) and asks for what follows.
Reads go through the database's one thread, like every other access from the event loop.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime

from gateway.devices.database import Database
from gateway.devices.readings import ReadingStored


def _utc(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, UTC)


def readings_after(conn: sqlite3.Connection, reading_id: int, limit: int) -> list[ReadingStored]:
    """Up to `limit` stored readings with an id above `reading_id`, oldest first."""
    rows = conn.execute('SELECT id, device_id, kind, "values", measured_at, received_at FROM readings'
                        " WHERE id > ? ORDER BY id LIMIT ?", (reading_id, limit)).fetchall()
    out = []
    for rid, device, kind, values, measured, received in rows:
        triples = json.loads(values)
        out.append(ReadingStored(rid, device, kind, {n: v for n, _, v in triples}, {n: u for n, u, _ in triples},
                                 _utc(measured), _utc(received)))
    return out


def last_reading_id(conn: sqlite3.Connection) -> int:
    return int(conn.execute("SELECT coalesce(max(id), 0) FROM readings").fetchone()[0])


class ReadingLog:
    """`after(id, limit)` and `last_id()` over the gateway's database (the feed's source)."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def after(self, reading_id: int, limit: int) -> list[ReadingStored]:
        return await self._db.run(readings_after, reading_id, limit)

    async def last_id(self) -> int:
        return await self._db.run(last_reading_id)
