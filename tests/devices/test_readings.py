"""Sensor readings: validation, durable storage before the ack, dedup, bus events (real SQLite)."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from firmware_protocol import ReadingStatus, SensorReading
from gateway.bus import EventBus
from gateway.devices.database import Database, connect
from gateway.devices.readings import ReadingService, ReadingStored, SqliteReadingStore, list_readings

NOW = 1_764_547_200.0  # 2025-12-01T00:00:00Z
BP = (("systolic", "mmHg", 120.0), ("diastolic", "mmHg", 80.0), ("pulse", "bpm", 72.0))


@pytest.fixture
def db(tmp_path: Path):
    database = Database(tmp_path / "gateway.db")
    yield database
    database.close()


@pytest.fixture
def bus() -> EventBus:
    return EventBus()


@pytest.fixture
async def store(db: Database):
    readings = SqliteReadingStore(db)  # its writer process: stopped after the test
    yield readings
    await readings.close()


@pytest.fixture
def service(store: SqliteReadingStore, bus: EventBus) -> ReadingService:
    return ReadingService(store, bus, clock=lambda: NOW)


async def test_a_valid_blood_pressure_reading_is_stored_acked_and_published(service, bus, db):
    sub = bus.subscribe(ReadingStored)
    ack = await service.handle("bp-1", "test", SensorReading(7, "blood_pressure", int(NOW) - 60, BP))
    assert (ack.seq, ack.status, ack.code) == (7, ReadingStatus.STORED, "")
    event = await asyncio.wait_for(sub.get(), 1)
    assert event.device_id == "bp-1" and event.kind == "blood_pressure"
    assert event.values == {"systolic": 120.0, "diastolic": 80.0, "pulse": 72.0}
    assert event.units == {"systolic": "mmHg", "diastolic": "mmHg", "pulse": "bpm"}
    assert event.measured_at == datetime.fromtimestamp(NOW - 60, UTC)
    assert event.received_at == datetime.fromtimestamp(NOW, UTC)
    [row] = await db.run(list_readings)
    assert row.reading_id == event.reading_id and row.seq == 7 and row.clock == "device"


async def test_a_resent_reading_is_acked_duplicate_and_neither_stored_nor_published_twice(service, bus, db):
    sub = bus.subscribe(ReadingStored)
    msg = SensorReading(9, "temperature", 0, (("celsius", "°C", 21.5),))
    assert (await service.handle("t-1", "test", msg)).status == ReadingStatus.STORED
    assert (await service.handle("t-1", "test", msg)).status == ReadingStatus.DUPLICATE
    assert len(await db.run(list_readings)) == 1
    assert sub.queue.qsize() == 1 and service.duplicates == 1


async def test_the_same_seq_from_two_devices_is_two_readings(service, db):
    msg = SensorReading(1, "humidity", 0, (("percent", "%", 40.0),))
    assert (await service.handle("a", "test", msg)).status == ReadingStatus.STORED
    assert (await service.handle("b", "test", msg)).status == ReadingStatus.STORED
    assert {r.device_id for r in await db.run(list_readings)} == {"a", "b"}


@pytest.mark.parametrize(
    ("values", "reason"),
    [
        ((("systolic", "mmHg", 400.0), ("diastolic", "mmHg", 80.0)), "systolic 400 mmHg is outside 40..300"),
        ((("systolic", "mmHg", 120.0),), "blood_pressure needs diastolic (mmHg)"),
        ((("systolic", "kPa", 16.0), ("diastolic", "mmHg", 80.0)), "systolic must be in mmHg, got 'kPa'"),
        ((("systolic", "mmHg", 80.0), ("diastolic", "mmHg", 90.0)), "diastolic must be below systolic"),
        (BP + (("mood", "", 1.0),), "blood_pressure has no value mood"),
    ],
)
async def test_an_implausible_reading_is_rejected_with_the_reason_and_nothing_is_stored(
    service, db, caplog, values, reason
):
    with caplog.at_level(logging.WARNING):
        ack = await service.handle("bp-1", "ws 10.0.0.5:4242 (bp-1)", SensorReading(3, "blood_pressure", 0, values))
    assert (ack.status, ack.code) == (ReadingStatus.REJECTED, "reading-invalid")
    assert ack.text.startswith(reason)
    assert await db.run(list_readings) == []
    assert "ws 10.0.0.5:4242 (bp-1): reading-invalid" in caplog.text and reason in caplog.text


async def test_a_reading_from_the_far_future_and_an_empty_generic_reading_are_rejected(service):
    future = await service.handle("x", "test", SensorReading(1, "co2", int(NOW) + 3 * 86400, (("ppm", "ppm", 400.0),)))
    assert future.status == ReadingStatus.REJECTED and "future" in future.text
    empty = await service.handle("x", "test", SensorReading(2, "co2", 0, ()))
    assert empty.status == ReadingStatus.REJECTED and "at least one value" in empty.text


async def test_a_generic_sensor_without_a_clock_is_stored_with_the_gateway_time(service, db):
    ack = await service.handle("lux-1", "test", SensorReading(1, "light", 0, (("lux", "lx", 350.0),)))
    assert ack.status == ReadingStatus.STORED
    [row] = await db.run(list_readings)
    assert row.clock == "gateway" and row.measured_at == datetime.fromtimestamp(NOW, UTC)
    assert row.values == {"lux": 350.0} and row.units == {"lux": "lx"}


async def test_a_database_failure_is_acked_storage_failed_and_logged(service, db, caplog):
    await db.run(lambda conn: conn.execute("DROP TABLE readings"))
    with caplog.at_level(logging.ERROR):
        ack = await service.handle("bp-1", "peer-x", SensorReading(5, "blood_pressure", 0, BP))
    assert (ack.status, ack.code) == (ReadingStatus.REJECTED, "storage-failed")
    assert "peer-x: storage-failed: reading seq 5 not stored" in caplog.text


KILL_SCRIPT = """
import asyncio, sys
from pathlib import Path
from firmware_protocol import SensorReading
from gateway.bus import EventBus
from gateway.devices.database import Database
from gateway.devices.readings import ReadingService, SqliteReadingStore

async def main():
    store = SqliteReadingStore(Database(Path(sys.argv[1])))
    service = ReadingService(store, EventBus())
    for seq in range(1, 1000000):
        ack = await service.handle("bp-9", "kill-test", SensorReading(seq, "humidity", 0, (("percent", "%", 50.0),)))
        print(ack.seq, ack.status.name, store.writer.pid, flush=True)

asyncio.run(main())
"""


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")  # (an orphan's zombie waits for init to reap it)


def test_every_acked_reading_survives_kill_9_right_after_the_ack_and_the_writer_process_ends(tmp_path):
    path = tmp_path / "gateway.db"
    proc = subprocess.Popen([sys.executable, "-c", KILL_SCRIPT, str(path)], stdout=subprocess.PIPE, text=True)
    acked = []
    writer = 0
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            seq, status, writer_pid = line.split()
            assert status == "STORED"
            acked.append(int(seq))
            writer = int(writer_pid)
            if len(acked) == 50:
                os.kill(proc.pid, signal.SIGKILL)
                break
    finally:
        proc.kill()
        proc.wait(10)
    deadline = time.monotonic() + 30
    while _running(writer) and time.monotonic() < deadline:  # its stdin closed with the gateway
        time.sleep(0.05)
    assert writer and not _running(writer)
    conn = connect(path)
    stored = {r.seq for r in list_readings(conn, limit=10**6)}
    conn.close()
    assert set(acked) <= stored


async def test_readings_beyond_the_per_minute_limit_are_refused_rate_limited_until_the_bucket_refills(db, store, bus, caplog):
    now = [NOW]
    service = ReadingService(store, bus, clock=lambda: now[0], per_minute=3)
    statuses = [(await service.handle("fast", "peer-f", SensorReading(i, "co2", 0, (("ppm", "ppm", 400.0),)))).code
                for i in range(1, 5)]
    assert statuses == ["", "", "", "rate-limited"]
    assert "peer-f: rate-limited: reading seq 4 refused" in caplog.text
    assert (await service.handle("other", "peer-o", SensorReading(1, "co2", 0, (("ppm", "ppm", 400.0),)))).code == ""
    now[0] += 20  # a third of a minute refills one token
    assert (await service.handle("fast", "peer-f", SensorReading(4, "co2", 0, (("ppm", "ppm", 400.0),)))).status == ReadingStatus.STORED
    assert len(await db.run(list_readings)) == 5
