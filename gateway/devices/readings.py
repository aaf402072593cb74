"""Sensor readings: validate, store durably (before the ack), deduplicate, publish on the bus.

A reading is acknowledged STORED only after its row is committed (see database.py), and each
device + seq is stored once: a resend is acked DUPLICATE and not published again. A session
handles its readings one at a time, or, where the device keeps several in flight (MQTT), at most
32 side by side (gateway/devices/reading_acks.py: acked in order, the next waits for the oldest),
so a slow disk pushes back on the device instead of filling a queue; readings that arrive
together, from one device or many, share one commit and one INSERT, made by a writer process
(`SqliteReadingStore`, gateway/devices/reading_writer.py).
"""

from __future__ import annotations

import asyncio
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
from gateway.errors import GatewayError
from gateway.devices.database import Database
from gateway.devices.reading_insert import Row, insert_row, insert_rows
from gateway.devices.reading_rules import ReadingInvalid, check_reading
from gateway.devices.reading_store import ReadingStore, StorageFailed, row_fields
from gateway.devices.reading_writer import ReadingWriter, writer_command

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
    """Store one reading on `conn` (the CLI, tests, benchmarks; the gateway's go through its
    writer process, `SqliteReadingStore`); returns (row id, True) or, for a known device + seq,
    (its id, False); (0, False) for a seq the retention already pruned. One statement: a failing
    call leaves nothing behind."""
    return insert_row(conn, reading_row(device_id, msg, received_at))


def insert_readings(conn: sqlite3.Connection, calls: list[tuple[str, SensorReading, float]]) -> list[tuple[int, bool]]:
    """`insert_reading` for each (device_id, msg, received_at), in one statement: what each call
    would return, in order (`reading_insert.insert_rows`)."""
    return insert_rows(conn, [reading_row(*call) for call in calls])


def reading_row(device_id: str, msg: SensorReading, received_at: float) -> Row:
    measured_at, clock, values = row_fields(msg, received_at)
    return device_id, msg.seq, msg.kind, measured_at, received_at, clock, values


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
    """The ReadingStore on the gateway's SQLite database: its rows are committed by a writer
    process of their own (gateway/devices/reading_writer.py), the readings that arrive together
    in one statement and one fsync."""

    def __init__(self, db: Database) -> None:
        self.writer = ReadingWriter(db.path)

    async def start(self) -> None:
        try:
            self.writer.start()
        except OSError as exc:  # (a broken Python install; the gateway does not start without it)
            raise GatewayError(f"cannot start the readings' writer process ({' '.join(writer_command(self.writer.database))}): "
                               f"{exc}; `gateway doctor` checks it") from exc

    async def close(self) -> None:
        self.writer.close()

    def insert(self, device_id: str, msg: SensorReading, received_at: float) -> asyncio.Future[tuple[int, bool]]:
        done: asyncio.Future[tuple[int, bool]] = asyncio.get_running_loop().create_future()
        self.insert_then(device_id, msg, received_at, partial(_settle_future, done))
        return done

    def insert_then(self, device_id: str, msg: SensorReading, received_at: float,
                    then: Callable[[tuple[int, bool] | None, BaseException | None], None]) -> None:
        """`then` is called in the loop pass that reads the commit's result (no future, no
        done-callback)."""
        self.writer.insert_then(reading_row(device_id, msg, received_at), then)


def _settle_future(done: asyncio.Future[tuple[int, bool]], result: tuple[int, bool] | None,
                   exc: BaseException | None) -> None:
    if done.done():  # its caller was cancelled
        return
    if exc is not None:
        done.set_exception(exc)
    else:
        assert result is not None
        done.set_result(result)


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
