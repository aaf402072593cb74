"""Readings retention: delete readings older than `devices.readings_retention_days`.

Pruning goes by the time the gateway *received* a reading (indexed), in short transactions of
`BATCH` rows, each its own `Database.run` call, each after the readings' writer process is idle
(`SqlitePruner`), so device readings arriving meanwhile are written between two batches and the
database's write lock is never held for long.

Pruning does not re-open a seq for duplicates: per device, the highest seq ever pruned is kept
in `readings_pruned` (in the same transaction as the delete). A resend at or below it that is no
longer in the table is acked DUPLICATE (it was stored once and has expired), not stored again.
This relies on what PROTOCOL.md asks of devices: seq grows and is kept across reboots.

The periodic task (`ReadingRetention`) prunes through a `Pruner`: `SqlitePruner` here (the
gateway's database thread); on PostgreSQL `PostgresPruner` (gateway/storage/retention.py), run by
one member of a cluster at a time (gateway/storage/cluster_job.py).

The newest row of the table is never pruned, however old: SQLite gives a new row the highest id
+ 1, so an emptied table would hand out ids again from 1, and the memory's feed, which has
turned every id up to its cursor into memories (reading_log.py), would skip them.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from gateway.devices.database import Database
from gateway.devices.reading_writer import ReadingWriter

log = logging.getLogger(__name__)

BATCH = 500
MAKE_WAY_S = 1.0  # how long a prune batch waits for the readings' writer to be idle
# readings old enough to prune, but never the newest row (ids must not be reused, see above)
_PRUNABLE = "received_at < ? AND id < (SELECT max(id) FROM readings)"
DAY_S = 86400.0


@dataclass
class PruneResult:
    """What one prune pass deleted (or, for a dry run, would delete), per device."""

    cutoff: float  # unix seconds: readings received before this
    per_device: dict[str, int] = field(default_factory=dict)
    batches: int = 0

    @property
    def total(self) -> int:
        return sum(self.per_device.values())


def pruned_through(conn: sqlite3.Connection, device_id: str) -> int | None:
    """The highest seq pruned for this device, or None when nothing of it was pruned."""
    row = conn.execute("SELECT max_seq FROM readings_pruned WHERE device_id = ?", (device_id,)).fetchone()
    return None if row is None else int(row[0])


def count_prunable(conn: sqlite3.Connection, cutoff: float) -> PruneResult:
    """A dry run: how many readings per device were received before `cutoff`."""
    rows = conn.execute(
        f"SELECT device_id, COUNT(*) FROM readings WHERE {_PRUNABLE} GROUP BY device_id ORDER BY device_id",
        (cutoff,),
    ).fetchall()
    return PruneResult(cutoff, {device: int(n) for device, n in rows})


def prune_batch(conn: sqlite3.Connection, cutoff: float, batch: int = BATCH) -> dict[str, int]:
    """Delete up to `batch` of the oldest readings received before `cutoff`, in one transaction,
    remembering per device the highest seq deleted. Returns the count deleted per device."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute("CREATE TEMP TABLE IF NOT EXISTS prune_ids (id INTEGER PRIMARY KEY)")
        conn.execute("DELETE FROM prune_ids")
        conn.execute(
            f"INSERT INTO prune_ids SELECT id FROM readings WHERE {_PRUNABLE} ORDER BY received_at LIMIT ?",
            (cutoff, batch),
        )
        stats = conn.execute(
            "SELECT device_id, COUNT(*), MAX(seq) FROM readings WHERE id IN (SELECT id FROM prune_ids)"
            " GROUP BY device_id"
        ).fetchall()
        conn.executemany(
            "INSERT INTO readings_pruned (device_id, max_seq, pruned, last_pruned_at) VALUES (?, ?, ?, ?)"
            " ON CONFLICT (device_id) DO UPDATE SET max_seq = MAX(max_seq, excluded.max_seq),"
            " pruned = pruned + excluded.pruned, last_pruned_at = excluded.last_pruned_at",
            [(device, max_seq, n, time.time()) for device, n, max_seq in stats],
        )
        conn.execute("DELETE FROM readings WHERE id IN (SELECT id FROM prune_ids)")
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return {device: int(n) for device, n, _ in stats}


def _add(result: PruneResult, counts: dict[str, int]) -> None:
    result.batches += 1
    for device, n in counts.items():
        result.per_device[device] = result.per_device.get(device, 0) + n


def prune_readings(conn: sqlite3.Connection, cutoff: float, batch: int = BATCH) -> PruneResult:
    """Synchronous prune (the CLI): batches until nothing older than `cutoff` is left."""
    result = PruneResult(cutoff)
    while counts := prune_batch(conn, cutoff, batch):
        _add(result, counts)
    return result


class Pruner(Protocol):
    async def prune_batch(self, cutoff: float, batch: int) -> dict[str, int]:
        """Delete up to `batch` readings received before `cutoff` in one transaction (pruned seqs
        recorded); the count deleted per device, {} when nothing is left."""
        ...


class SqlitePruner:
    """Pruning on the gateway's SQLite database, on its writer thread; before each batch it waits
    (a second at most) for the readings' writer process to be idle, so readings that arrive
    during a long prune are stored between its batches."""

    def __init__(self, db: Database, readings: ReadingWriter | None = None) -> None:
        self._db = db
        self._readings = readings

    async def prune_batch(self, cutoff: float, batch: int) -> dict[str, int]:
        if self._readings is not None:
            await self._readings.wait_idle(MAKE_WAY_S)
        return await self._db.run(prune_batch, cutoff, batch)


async def prune_with(pruner: Pruner, cutoff: float, batch: int = BATCH) -> PruneResult:
    """Batches until nothing older than `cutoff` is left (or the pruner keeps the rest)."""
    result = PruneResult(cutoff)
    while counts := await pruner.prune_batch(cutoff, batch):
        _add(result, counts)
    return result


def describe(result: PruneResult, dry_run: bool = False) -> str:
    when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(result.cutoff))
    verb = "would prune" if dry_run else "pruned"
    devices = ", ".join(f"{d} {n}" for d, n in sorted(result.per_device.items())) or "none"
    return f"{verb} {result.total} readings received before {when} (per device: {devices})"


class ReadingRetention:
    """The periodic task: prune at start, then every `interval_s` (a day)."""

    def __init__(self, pruner: Pruner, days: float, clock: Callable[[], float] = time.time,
                 interval_s: float = DAY_S, batch: int = BATCH) -> None:
        self.pruner, self.days, self.clock = pruner, days, clock
        self.interval_s, self.batch = interval_s, batch
        self.passes = 0
        self.failures = 0
        self.last: PruneResult | None = None
        self.done = asyncio.Event()  # set after each pass (tests wait on it)

    async def prune_once(self) -> PruneResult:
        started = time.monotonic()
        result = await prune_with(self.pruner, self.clock() - self.days * DAY_S, self.batch)
        if result.total:
            log.info("readings retention (%g days): %s in %d batches, %.2f s",
                     self.days, describe(result), result.batches, time.monotonic() - started)
        else:
            log.debug("readings retention (%g days): nothing to prune", self.days)
        self.passes += 1
        self.last = result
        self.done.set()
        return result

    async def run(self) -> None:
        """Forever; a database error is logged and retried at the next pass (readings keep flowing)."""
        while True:
            try:
                await self.prune_once()
            except Exception:  # the boundary of this task (sqlite3 or psycopg errors): try again later
                self.failures += 1
                log.exception("readings retention: pruning failed; retrying in %.0f s", self.interval_s)
                self.done.set()
            await asyncio.sleep(self.interval_s)
