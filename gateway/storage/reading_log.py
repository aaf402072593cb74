"""The readings on PostgreSQL read in commit order: the memory's feed source (gateway/memory/
reading_feed.py) when several gateways write readings.

Ids are taken before commit, so with concurrent writers a reading with a lower id can commit
after a higher one has been read; `id > cursor` would skip it for ever. The feed therefore reads
in `(xid, id)` order (xid: the inserting transaction, `pg_current_xact_id()`), and only rows whose
transaction is below the oldest one still running (`pg_snapshot_xmin`): every reading not yet
returned commits later with an `(xid, id)` above the last one returned (docs/SCALE-OUT.md,
"Readings"). The feed's cursor stays a reading id (committed with the memories it produced); its
`(xid, id)` is that row's. The retention (gateway/storage/retention.py) never deletes the cursor's
row nor anything the feed has not consumed; were the row gone, `after` raises (the feed logs it and retries) rather than
guessing a position and remembering readings twice. `last_id` is the highest id, as on SQLite:
the feed's start-up checks ("a cursor beyond the readings") compare ids.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from datetime import UTC, datetime
from typing import Protocol

from psycopg_pool import AsyncConnectionPool

from gateway.devices.readings import ReadingStored

_VISIBLE = "xid < pg_snapshot_xmin(pg_current_snapshot())"
POLL_S = 1.0  # the feed looks for the other members' readings at least this often


class Wake(Protocol):
    async def wait(self) -> None: ...


class PollingWake:
    """`wait()` returns on the bus's wake-up or after `poll_s`, whichever comes first: readings
    stored by the other gateways raise no event on this one's bus."""

    def __init__(self, inner: Wake, poll_s: float = POLL_S) -> None:
        self._inner, self._poll_s = inner, poll_s

    async def wait(self) -> None:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self._poll_s):
                await self._inner.wait()


def _utc(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, UTC)


class PostgresReadingLog:
    def __init__(self, pool: AsyncConnectionPool) -> None:
        self._pool = pool

    async def after(self, reading_id: int, limit: int) -> list[ReadingStored]:
        """Up to `limit` committed readings after the reading `reading_id` (0: from the first) in (xid, id) order."""
        async with self._pool.connection() as conn:
            xid = "0"
            if reading_id:
                row = await (await conn.execute("SELECT xid::text FROM readings WHERE id = %s", (reading_id,))).fetchone()
                if row is None:
                    raise LookupError(f"the memory's feed cursor, reading #{reading_id}, is not in the PostgreSQL "
                                      "readings table")
                xid = row[0]
            rows = await (await conn.execute(
                'SELECT id, device_id, kind, "values", measured_at, received_at FROM readings'
                f" WHERE (xid, id) > (%s::xid8, %s) AND {_VISIBLE} ORDER BY xid, id LIMIT %s",
                (xid, reading_id, limit))).fetchall()
        out = []
        for rid, device, kind, values, measured, received in rows:
            triples = json.loads(values)
            out.append(ReadingStored(rid, device, kind, {n: v for n, _, v in triples},
                                     {n: u for n, u, _ in triples}, _utc(measured), _utc(received)))
        return out

    async def last_id(self) -> int:
        async with self._pool.connection() as conn:
            row = await (await conn.execute("SELECT coalesce(max(id), 0) FROM readings")).fetchone()
        return int(row[0])
