"""The readings on PostgreSQL as the console lists, charts and exports them (the ReadingList of
gateway/devices/reading_list.py): every gateway's console shows every gateway's readings."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from psycopg_pool import AsyncConnectionPool

from gateway.devices.readings import StoredRow


class PostgresReadingList:
    def __init__(self, pool: AsyncConnectionPool) -> None:
        self._pool = pool

    async def recent(self, kind: str | None, limit: int, since: float, device_id: str | None = None) -> list[StoredRow]:
        sql = 'SELECT id, device_id, seq, kind, "values", measured_at, received_at, clock FROM readings WHERE measured_at >= %s'
        args: list[object] = [since]
        if kind:
            sql += " AND kind = %s"
            args.append(kind)
        if device_id:
            sql += " AND device_id = %s"
            args.append(device_id)
        async with self._pool.connection() as conn:
            rows = await (await conn.execute(sql + " ORDER BY id DESC LIMIT %s", (*args, limit))).fetchall()
        out = []
        for rid, device, seq, kind_, values, measured, received, clock in rows:
            triples = json.loads(values)
            out.append(StoredRow(rid, device, seq, kind_, {n: v for n, _, v in triples}, {n: u for n, u, _ in triples},
                                 datetime.fromtimestamp(measured, UTC), datetime.fromtimestamp(received, UTC), clock))
        return out

    async def kinds(self) -> list[tuple[str, str]]:
        async with self._pool.connection() as conn:
            rows = await (await conn.execute("SELECT DISTINCT device_id, kind FROM readings ORDER BY device_id, kind")).fetchall()
        return [(d, k) for d, k in rows]
