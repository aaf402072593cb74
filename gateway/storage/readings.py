"""Readings on PostgreSQL: the ReadingStore several gateways share (gateway/devices/reading_store.py).

One device + seq is one row across every gateway: `UNIQUE (device_id, seq)` and `ON CONFLICT DO
NOTHING`, so a reading resent to another gateway after a failover is found, not stored twice (a
concurrent insert of the same seq waits for the first and then sees it). `insert` returns after
the commit (`synchronous_commit` on, PostgreSQL's default), so the ack follows durability; when
the database is unreachable it raises StorageFailed and the device is not acked. A seq at or
below the highest one the retention pruned (`readings_pruned`) is a duplicate, as on SQLite.
"""

from __future__ import annotations

import psycopg
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from firmware_protocol import SensorReading
from gateway.devices.reading_store import ReadingStore, StorageFailed, row_fields


class PostgresReadingStore(ReadingStore):  # insert_then: the default, on insert's task
    def __init__(self, pool: AsyncConnectionPool) -> None:
        self._pool = pool

    async def insert(self, device_id: str, msg: SensorReading, received_at: float) -> tuple[int, bool]:
        measured_at, clock, values = row_fields(msg, received_at)
        try:
            async with self._pool.connection() as conn:
                async with conn.transaction():
                    row = await (await conn.execute(
                        'INSERT INTO readings (device_id, seq, kind, measured_at, received_at, clock, "values")'
                        " VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (device_id, seq) DO NOTHING RETURNING id",
                        (device_id, msg.seq, msg.kind, measured_at, received_at, clock, values))).fetchone()
                    # read after the insert, in a statement of its own: it sees a prune that deleted
                    # this seq while the insert waited for it (the prune commits readings_pruned with
                    # its delete), so a pruned seq is never stored again (docs: retention.py)
                    pruned = await (await conn.execute(
                        "SELECT max_seq FROM readings_pruned WHERE device_id = %s", (device_id,))).fetchone()
                    if pruned is not None and msg.seq <= pruned[0]:
                        if row is not None:
                            raise psycopg.Rollback()  # a resend of a pruned seq: not a new row
                        row = await (await conn.execute("SELECT id FROM readings WHERE device_id = %s AND seq = %s",
                                                        (device_id, msg.seq))).fetchone()
                        return (int(row[0]), False) if row else (0, False)  # pruned: still a duplicate
                    if row is not None:
                        return int(row[0]), True
                    row = await (await conn.execute("SELECT id FROM readings WHERE device_id = %s AND seq = %s",
                                                    (device_id, msg.seq))).fetchone()
                    return (int(row[0]), False) if row else (0, False)  # (pruned meanwhile)
                return 0, False  # rolled back: pruned, still a duplicate
        except PoolTimeout as exc:
            raise StorageFailed(f"PostgreSQL unreachable: {exc}") from exc
        except psycopg.Error as exc:
            raise StorageFailed(f"PostgreSQL error: {exc}") from exc
