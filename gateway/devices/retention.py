"""Readings retention: delete readings older than `devices.readings_retention_days`.

Pruning goes by the time the gateway *received* a reading (indexed), in short transactions of
`BATCH` rows, each a request of its own to the readings' writer process (`SqlitePruner`), so
device readings arriving meanwhile are written between two batches and the database's write lock
is never held for long.

Pruning does not re-open a seq for duplicates: per device, the highest seq ever pruned is kept
in `readings_pruned` (in the same transaction as the delete). A resend at or below it that is no
longer in the table is acked DUPLICATE (it was stored once and has expired), not stored again.
This relies on what PROTOCOL.md asks of devices: seq grows and is kept across reboots.

The periodic task (`ReadingRetention`) prunes through a `Pruner`: `SqlitePruner` here (the
readings' writer process, gateway/devices/reading_writer.py); on PostgreSQL `PostgresPruner` (gateway/storage/retention.py), run by
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

from gateway.devices.reading_insert import PRUNABLE, prune_batch
from gateway.devices.reading_writer import ReadingWriter

log = logging.getLogger(__name__)

BATCH = 500
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
        f"SELECT device_id, COUNT(*) FROM readings WHERE {PRUNABLE} GROUP BY device_id ORDER BY device_id",
        (cutoff,),
    ).fetchall()
    return PruneResult(cutoff, {device: int(n) for device, n in rows})


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
    """Pruning on the gateway's SQLite database, by the readings' writer process, the one writer
    of the readings table: each batch is a request of its own, and the readings that arrive
    meanwhile go before the next one."""

    def __init__(self, writer: ReadingWriter) -> None:
        self._writer = writer

    async def prune_batch(self, cutoff: float, batch: int) -> dict[str, int]:
        return await self._writer.prune(cutoff, batch)


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
