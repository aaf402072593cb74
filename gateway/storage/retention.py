"""Readings retention on PostgreSQL: the `Pruner` (gateway/devices/retention.py) of
`devices.readings_retention_days` when several gateways share the readings. One member runs it
(a ClusterJob, gateway/storage/cluster_job.py).

Each batch is one statement in one short transaction: up to `batch` of the oldest readings
received before the cutoff are deleted and, per device, the highest seq deleted is kept in
`readings_pruned`, so a resend of a pruned seq is still a duplicate (PostgresReadingStore).

Never a reading the memory's feed has not consumed: the feed reads in `(xid, id)` order up to
its cursor (`feed_cursors`, a reading id; gateway/storage/reading_log.py), so only readings
below the cursor's `(xid, id)` go, and the cursor's own row stays (the feed finds its place by
it). While the feed has consumed nothing (cursor 0), nothing goes either, unless this gateway
runs without the memory (`feeds_memory` False): then by age alone, the cursor's row still kept.
Readings the cursor holds back are logged (a memory that stopped feeding keeps them all).
"""

from __future__ import annotations

import logging
import time

from psycopg_pool import AsyncConnectionPool

from gateway.devices.retention import PruneResult

log = logging.getLogger(__name__)

_CURSOR = ("SELECT c.position, r.xid::text FROM feed_cursors c LEFT JOIN readings r ON r.id = c.position"
           " WHERE c.name = 'readings'")

_PRUNE = """
WITH doomed AS (
    SELECT id FROM readings WHERE received_at < %(cutoff)s AND id <> %(cursor)s AND {bound}
    ORDER BY received_at LIMIT %(batch)s
), gone AS (
    DELETE FROM readings r USING doomed d WHERE r.id = d.id RETURNING r.device_id, r.seq
), per_device AS (
    SELECT device_id, count(*) AS n, max(seq) AS max_seq FROM gone GROUP BY device_id
), kept AS (
    INSERT INTO readings_pruned AS p (device_id, max_seq, pruned, last_pruned_at)
    SELECT device_id, max_seq, n, %(now)s FROM per_device
    ON CONFLICT (device_id) DO UPDATE SET max_seq = GREATEST(p.max_seq, EXCLUDED.max_seq),
        pruned = p.pruned + EXCLUDED.pruned, last_pruned_at = EXCLUDED.last_pruned_at
)
SELECT device_id, n FROM per_device
"""
_FED = "(xid, id) < (%(xid)s::xid8, %(cursor)s)"  # consumed by the feed, in its order


class PostgresPruner:
    def __init__(self, pool: AsyncConnectionPool, feeds_memory: bool) -> None:
        self._pool, self.feeds_memory = pool, feeds_memory

    async def _bound(self, conn) -> tuple[str, dict] | None:
        """The WHERE part that keeps the unfed readings, with its parameters; None: prune nothing."""
        row = await (await conn.execute(_CURSOR)).fetchone()
        cursor, xid = (int(row[0]), row[1]) if row else (0, None)
        if cursor and xid is None:
            log.error("readings retention: the memory's feed cursor, reading #%d, is not in the readings table; "
                      "nothing pruned", cursor)
            return None
        if cursor:
            return _FED, {"cursor": cursor, "xid": xid}
        if self.feeds_memory:  # the feed has consumed nothing yet (it may be starting): keep everything
            return None
        return "true", {"cursor": 0}

    async def prune_batch(self, cutoff: float, batch: int) -> dict[str, int]:
        async with self._pool.connection() as conn, conn.transaction():
            bound = await self._bound(conn)
            rows = []
            if bound is not None:
                where, params = bound
                rows = await (await conn.execute(_PRUNE.format(bound=where), {
                    **params, "cutoff": cutoff, "batch": batch, "now": time.time()})).fetchall()
            if not rows:  # the pass ends here: say what stays behind the feed
                await self._log_held_back(conn, cutoff)
        return {device: int(n) for device, n in rows}

    async def _log_held_back(self, conn, cutoff: float) -> None:
        row = await (await conn.execute("SELECT count(*) FROM readings WHERE received_at < %s", (cutoff,))).fetchone()
        if row[0] > 1:  # more than the cursor's own row
            log.warning("readings retention: %d readings older than the cutoff are kept: the memory's readings feed "
                        "has not consumed them yet (is the memory running on a gateway of this database?)", row[0])

    async def count(self, cutoff: float) -> PruneResult:
        """A dry run: how many readings per device the next passes would prune."""
        async with self._pool.connection() as conn:
            bound = await self._bound(conn)
            if bound is None:
                return PruneResult(cutoff)
            where, params = bound
            rows = await (await conn.execute(
                f"SELECT device_id, count(*) FROM readings WHERE received_at < %(cutoff)s AND id <> %(cursor)s"
                f" AND {where} GROUP BY device_id ORDER BY device_id", {**params, "cutoff": cutoff})).fetchall()
        return PruneResult(cutoff, {device: int(n) for device, n in rows})
