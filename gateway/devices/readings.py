"""Sensor readings: validate, store durably (before the ack), deduplicate, publish on the bus.

A reading is acknowledged STORED only after its row is committed (see database.py), and each
device + seq is stored once: a resend is acked DUPLICATE and not published again. A session
handles its readings one at a time, or, where the device keeps several in flight (MQTT), at most
32 side by side (gateway/devices/reading_acks.py: acked in order, the next waits for the oldest),
so a slow disk pushes back on the device instead of filling a queue; readings that arrive
together, from one device or many, share one commit and one INSERT (`Database.grouped`,
`insert_readings`).
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import sqlite3
import time
from collections.abc import Callable
from functools import partial
from dataclasses import dataclass
from datetime import UTC, datetime

from firmware_protocol import ReadingAck, ReadingStatus, SensorReading
from gateway.bus import EventBus
from gateway.devices.database import Database
from gateway.devices.reading_rules import ReadingInvalid, check_reading
from gateway.devices.reading_store import ReadingStore, StorageFailed, row_fields

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ReadingStored:
    """Bus event: a new reading is durably stored (published once per device + seq)."""

    reading_id: int
    device_id: str
    kind: str
    values: dict[str, float]
    units: dict[str, str]
    measured_at: datetime
    received_at: datetime


@dataclass(frozen=True)
class StoredRow:
    """A reading as listed by `gateway readings`."""

    reading_id: int
    device_id: str
    seq: int
    kind: str
    values: dict[str, float]
    units: dict[str, str]
    measured_at: datetime
    received_at: datetime
    clock: str  # "device" when measured_at came from the device, "gateway" when it had no clock


def _utc(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, UTC)


def insert_reading(
    conn: sqlite3.Connection, device_id: str, msg: SensorReading, received_at: float
) -> tuple[int, bool]:
    """Store one reading; returns (row id, True) or, for a known device + seq, (its id, False);
    (0, False) for a seq the retention already pruned. One statement writes (the insert), so a
    failing call leaves nothing behind (`Database.run_grouped(..., one_write=True)`)."""
    # The common case, a new reading, in one statement: inserted unless the device + seq is
    # stored already (the unique key) or at or below the seq the retention pruned up to.
    cur = conn.execute(
        'INSERT INTO readings (device_id, seq, kind, measured_at, received_at, clock, "values")'
        " SELECT ?, ?, ?, ?, ?, ?, ?"
        " WHERE NOT EXISTS (SELECT 1 FROM readings_pruned WHERE device_id = ? AND max_seq >= ?)"
        " ON CONFLICT (device_id, seq) DO NOTHING",
        (*_row(device_id, msg, received_at), device_id, msg.seq),
    )
    if cur.rowcount == 1:
        return int(cur.lastrowid or 0), True
    return _stored_before(conn, device_id, msg.seq)


def insert_readings(conn: sqlite3.Connection, calls: list[tuple[str, SensorReading, float]]) -> list[tuple[int, bool]]:
    """`insert_reading` for each (device_id, msg, received_at), in one statement: what each call
    would return, in order (a device + seq twice: the first is new, the second its duplicate).
    The readings of one commit cost one INSERT (`Database.grouped(..., batch=insert_readings)`).

    The new rows' ids come without RETURNING (whose rows cost one step each, each giving the
    GIL back and taking it again while the event loop runs): SQLite gives a row inserted without
    an id the table's largest id + 1 (https://sqlite.org/autoinc.html: random ids only once the
    largest is 2**63 - 1, and no id is ever given to this table), so the rows one statement
    inserts have consecutive ids ending at `lastrowid`. When every reading was new (the common
    case) that is the whole answer; else each reading's id is looked up: an id above `lastrowid`
    minus the count inserted is new, the first time it comes."""
    rows: list[object] = []
    for device_id, msg, received_at in calls:
        rows += _row(device_id, msg, received_at)
    cur = conn.execute(_insert_many_sql(len(calls)), rows)
    inserted, last = cur.rowcount, int(cur.lastrowid or 0)
    if inserted == len(calls):
        return [(rid, True) for rid in range(last - inserted + 1, last + 1)]
    first_new = last - inserted + 1 if inserted > 0 else None  # (lastrowid is an older insert's)
    out: list[tuple[int, bool]] = []
    seen: set[int] = set()
    for device_id, msg, _ in calls:
        rid, _ = _stored_before(conn, device_id, msg.seq)
        out.append((rid, first_new is not None and rid >= first_new and rid not in seen))
        seen.add(rid)
    return out


def _row(device_id: str, msg: SensorReading, received_at: float) -> tuple[object, ...]:
    measured_at, clock, values = row_fields(msg, received_at)
    return device_id, msg.seq, msg.kind, measured_at, received_at, clock, values


@functools.lru_cache(maxsize=64)
def _insert_many_sql(count: int) -> str:
    return ('INSERT INTO readings (device_id, seq, kind, measured_at, received_at, clock, "values")'
            " SELECT * FROM (VALUES " + ", ".join(["(?, ?, ?, ?, ?, ?, ?)"] * count) + ") AS v"
            " WHERE NOT EXISTS (SELECT 1 FROM readings_pruned p"
            " WHERE p.device_id = v.column1 AND p.max_seq >= v.column2)"
            " ON CONFLICT (device_id, seq) DO NOTHING")


def _stored_before(conn: sqlite3.Connection, device_id: str, seq: int) -> tuple[int, bool]:
    """A reading not inserted: (its id, False), or (0, False) when the retention removed it."""
    row = conn.execute("SELECT id FROM readings WHERE device_id = ? AND seq = ?", (device_id, seq)).fetchone()
    if row is None:  # stored once, then removed by the retention: still a duplicate (retention.py)
        return 0, False
    return int(row[0]), False


def list_readings(
    conn: sqlite3.Connection, device_id: str | None = None, kind: str | None = None, limit: int = 50,
    since: float | None = None,
) -> list[StoredRow]:
    """The newest readings first, optionally for one device and/or kind, measured at or after `since`."""
    where, args = [], []
    if since is not None:
        where.append("measured_at >= ?")
        args.append(since)
    if device_id:
        where.append("device_id = ?")
        args.append(device_id)
    if kind:
        where.append("kind = ?")
        args.append(kind)
    sql = 'SELECT id, device_id, seq, kind, "values", measured_at, received_at, clock FROM readings'
    if where:
        sql += " WHERE " + " AND ".join(where)
    rows = conn.execute(sql + " ORDER BY id DESC LIMIT ?", (*args, limit)).fetchall()
    out = []
    for rid, dev, seq, kind_, values, measured, received, clock in rows:
        triples = json.loads(values)
        out.append(StoredRow(rid, dev, seq, kind_, {n: v for n, _, v in triples}, {n: u for n, u, _ in triples},
                             _utc(measured), _utc(received), clock))
    return out


def reading_kinds(conn: sqlite3.Connection) -> list[tuple[str, str]]:
    """Every (device id, kind) that has readings stored."""
    return [(d, k) for d, k in conn.execute("SELECT DISTINCT device_id, kind FROM readings ORDER BY device_id, kind")]


class SqliteReadingStore(ReadingStore):
    """The ReadingStore on the gateway's SQLite database (its one writer thread)."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def insert(self, device_id: str, msg: SensorReading, received_at: float) -> asyncio.Future[tuple[int, bool]]:
        return self._db.grouped(insert_reading, device_id, msg, received_at,  # shares a commit and,
                                one_write=True, error=_storage_failed, batch=insert_readings)  # its INSERT

    def insert_then(self, device_id: str, msg: SensorReading, received_at: float,
                    then: Callable[[tuple[int, bool] | None, BaseException | None], None]) -> None:
        """`then` is called in the loop pass that settles the commit (no future, no done-callback)."""
        self._db.grouped_then(insert_reading, device_id, msg, received_at, then=then,
                              one_write=True, error=_storage_failed, batch=insert_readings)


def _storage_failed(exc: Exception) -> Exception:
    if not isinstance(exc, sqlite3.Error):
        return exc
    failed = StorageFailed(f"database error: {exc}")
    failed.__cause__ = exc
    return failed


class ReadingService:
    """Turns a device's SensorReading into a durable row, a bus event and a ReadingAck."""

    def __init__(
        self, store: ReadingStore, bus: EventBus, clock: Callable[[], float] = time.time, per_minute: int = 0
    ) -> None:
        self._store = store
        self._bus = bus
        self._clock = clock
        self._per_minute = per_minute  # 0: no limit
        self._buckets: dict[str, tuple[float, float]] = {}  # device -> (tokens, at)
        self.stored = 0
        self.duplicates = 0
        self.rejected = 0

    def _take_token(self, device_id: str, now: float) -> bool:
        """Token bucket per device: bursts up to per_minute, refilled at per_minute / 60 per second."""
        if not self._per_minute:
            return True
        tokens, at = self._buckets.get(device_id, (float(self._per_minute), now))
        tokens = min(float(self._per_minute), tokens + (now - at) * self._per_minute / 60)
        if tokens < 1:
            self._buckets[device_id] = (tokens, now)
            return False
        self._buckets[device_id] = (tokens - 1, now)
        return True

    async def handle(self, device_id: str, peer: str, msg: SensorReading) -> ReadingAck:
        return await self.start(device_id, peer, msg)

    def start(self, device_id: str, peer: str, msg: SensorReading) -> asyncio.Future[ReadingAck]:
        """`handle` without a task per reading: the future of the reading's ack, set once its row
        is committed (or at once when it is refused). Cancelling the future drops the ack only:
        a reading that gets stored is counted and published all the same."""
        ack: asyncio.Future[ReadingAck] = asyncio.get_running_loop().create_future()
        received_at = self._clock()
        if not self._take_token(device_id, received_at):
            self.rejected += 1
            log.warning("%s: rate-limited: reading seq %d refused (limit %d per minute)", peer, msg.seq, self._per_minute)
            ack.set_result(ReadingAck(msg.seq, ReadingStatus.REJECTED, "rate-limited",
                                      f"more than {self._per_minute} readings per minute; resend later"))
            return ack
        try:
            check_reading(msg, received_at)
        except ReadingInvalid as exc:
            self.rejected += 1
            log.warning("%s: reading-invalid: %s reading seq %d refused: %s", peer, msg.kind, msg.seq, exc)
            ack.set_result(ReadingAck(msg.seq, ReadingStatus.REJECTED, "reading-invalid", str(exc)))
            return ack
        # SQLite: the ack is made in the loop pass that settles the commit
        self._store.insert_then(device_id, msg, received_at, partial(self._stored, ack, device_id, peer, msg,
                                                                     received_at))
        return ack

    def _stored(self, ack: asyncio.Future[ReadingAck], device_id: str, peer: str, msg: SensorReading,
                received_at: float, stored: tuple[int, bool] | None, exc: BaseException | None) -> None:
        if isinstance(exc, StorageFailed):
            self.rejected += 1
            log.error("%s: storage-failed: reading seq %d not stored, not acked (the device resends): %s",
                      peer, msg.seq, exc)
            outcome = ReadingAck(msg.seq, ReadingStatus.REJECTED, "storage-failed", str(exc))
        elif exc is not None or stored is None:  # (cancelled, or a bug): the session hears it with the ack
            if not ack.done():
                ack.set_exception(exc if exc is not None else RuntimeError("the store gave no result"))
            return
        else:
            reading_id, new = stored
            outcome = self._new(device_id, peer, msg, received_at, reading_id) if new else \
                self._duplicate(peer, msg, reading_id)
        if not ack.done():  # else the session ended meanwhile
            ack.set_result(outcome)

    def _duplicate(self, peer: str, msg: SensorReading, reading_id: int) -> ReadingAck:
        self.duplicates += 1
        if reading_id:
            log.info("%s: reading seq %d is a duplicate of #%d; acked again, not stored", peer, msg.seq, reading_id)
        else:
            log.info("%s: reading seq %d was stored before and pruned by the retention; acked duplicate, "
                     "not stored again", peer, msg.seq)
        return ReadingAck(msg.seq, ReadingStatus.DUPLICATE)

    def _new(self, device_id: str, peer: str, msg: SensorReading, received_at: float, reading_id: int) -> ReadingAck:
        self.stored += 1
        measured_at = msg.measured_at or received_at
        self._bus.publish(
            ReadingStored(
                reading_id=reading_id,
                device_id=device_id,
                kind=msg.kind,
                values={name: value for name, _, value in msg.values},
                units={name: unit for name, unit, _ in msg.values},
                measured_at=_utc(measured_at),
                received_at=_utc(received_at),
            )
        )
        log.debug("%s: stored %s reading seq %d as #%d", peer, msg.kind, msg.seq, reading_id)
        return ReadingAck(msg.seq, ReadingStatus.STORED)
