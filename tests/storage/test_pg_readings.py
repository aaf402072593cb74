"""Readings on a real PostgreSQL: committed before the ack, one row per device + seq across
gateways, and nothing acked while the database is down (the device resends; nothing acked lost)."""

from __future__ import annotations

import asyncio
import threading
import time

import psycopg

from firmware_protocol import ReadingStatus, SensorReading
from gateway.bus import EventBus
from gateway.config import parse_config
from gateway.devices.readings import ReadingService, ReadingStored
from gateway.storage.pool import migrate_dsn, open_pool
from gateway.storage.readings import PostgresReadingStore
from gateway.storage.schema import MIGRATIONS
from tests.conftest import ROOT

STORAGE = parse_config({"storage": {"backend": "postgres", "connect_timeout_s": 2, "pool_size": 4}}, ROOT).storage
NOW = 1_764_547_200.0
BP = (("systolic", "mmHg", 120.0), ("diastolic", "mmHg", 80.0), ("pulse", "bpm", 72.0))


def reading(seq: int) -> SensorReading:
    return SensorReading(seq, "blood_pressure", 0, BP)


def rows(dsn: str, device: str = "bp-1") -> list[tuple[int, int]]:
    with psycopg.connect(dsn) as conn:
        return conn.execute("SELECT seq, count(*) FROM readings WHERE device_id = %s GROUP BY seq ORDER BY seq",
                            (device,)).fetchall()


def test_migrations_run_once_when_gateways_start_together(postgres_dsn: str) -> None:
    versions, errors = [], []

    def run() -> None:
        try:
            versions.append(migrate_dsn(postgres_dsn, STORAGE))
        except Exception as exc:  # collected: the assertion names it
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and versions == [len(MIGRATIONS)] * 4
    with psycopg.connect(postgres_dsn) as conn:
        assert conn.execute("SELECT version FROM schema_version ORDER BY version").fetchall() == [
                (n,) for n in range(1, len(MIGRATIONS) + 1)]
        assert conn.execute("SELECT extname FROM pg_extension WHERE extname = 'vector'").fetchone() == ("vector",)


async def test_stored_then_duplicate(postgres_dsn: str) -> None:
    bus = EventBus()
    events = bus.subscribe(ReadingStored)
    pool = await open_pool(postgres_dsn, STORAGE)
    try:
        service = ReadingService(PostgresReadingStore(pool), bus, clock=lambda: NOW)
        assert (await service.handle("bp-1", "peer", reading(7))).status == ReadingStatus.STORED
        assert (await service.handle("bp-1", "peer", reading(7))).status == ReadingStatus.DUPLICATE
        assert events.queue.qsize() == 1
        event = await events.get()
        assert (event.device_id, event.values["systolic"]) == ("bp-1", 120.0)
    finally:
        await pool.close()
    assert rows(postgres_dsn) == [(7, 1)]
    with psycopg.connect(postgres_dsn) as conn:
        assert conn.execute('SELECT clock, "values" FROM readings').fetchone() == (
            "gateway", '[["systolic", "mmHg", 120.0], ["diastolic", "mmHg", 80.0], ["pulse", "bpm", 72.0]]')


async def test_a_pruned_seq_stays_a_duplicate(postgres_dsn: str) -> None:
    pool = await open_pool(postgres_dsn, STORAGE)
    try:
        async with pool.connection() as conn:
            await conn.execute("INSERT INTO readings_pruned (device_id, max_seq) VALUES ('bp-1', 10)")
        store = PostgresReadingStore(pool)
        assert await store.insert("bp-1", reading(9), NOW) == (0, False)
        assert (await store.insert("bp-1", reading(11), NOW))[1] is True
    finally:
        await pool.close()
    assert rows(postgres_dsn) == [(11, 1)]


async def test_two_gateways_storing_the_same_readings_store_each_once(postgres_dsn: str) -> None:
    """A device that resends to a second gateway (failover) while the first still stores."""
    pools = [await open_pool(postgres_dsn, STORAGE) for _ in range(2)]
    try:
        services = [ReadingService(PostgresReadingStore(p), EventBus(), clock=lambda: NOW) for p in pools]

        async def send(service: ReadingService) -> list[ReadingStatus]:
            return [(await service.handle("bp-1", "peer", reading(seq))).status for seq in range(1, 201)]

        a, b = await asyncio.gather(send(services[0]), send(services[1]))
    finally:
        for p in pools:
            await p.close()
    assert rows(postgres_dsn) == [(seq, 1) for seq in range(1, 201)]
    for seq in range(200):  # every seq: stored by exactly one gateway, a duplicate for the other
        assert sorted((a[seq], b[seq])) == [ReadingStatus.STORED, ReadingStatus.DUPLICATE]


async def test_nothing_acked_while_postgres_is_down_and_nothing_acked_is_lost(postgres_dsn, postgres_server, caplog):
    """A device sends a reading every 20 ms and resends each until it is acked, while PostgreSQL
    is killed (immediate stop: as if it crashed) and started again 5 s later (each attempt meanwhile
    waits storage.connect_timeout_s, 2 s here, then is refused)."""
    pool = await open_pool(postgres_dsn, STORAGE)
    service = ReadingService(PostgresReadingStore(pool), EventBus())
    acked: set[int] = set()
    refused_while_down = 0
    down = asyncio.Event()
    stop = asyncio.Event()

    async def device() -> None:
        nonlocal refused_while_down
        seq = 1
        while not stop.is_set():
            ack = await service.handle("bp-1", "device-peer", reading(seq))
            if ack.status in (ReadingStatus.STORED, ReadingStatus.DUPLICATE):
                acked.add(seq)
                seq += 1
            else:
                assert (ack.status, ack.code) == (ReadingStatus.REJECTED, "storage-failed")
                if down.is_set():
                    refused_while_down += 1
                await asyncio.sleep(0.1)  # resend the same seq later
            await asyncio.sleep(0.02)

    task = asyncio.create_task(device())
    try:
        await asyncio.sleep(1.0)
        before = len(acked)
        await asyncio.to_thread(postgres_server.stop, "immediate")
        down.set()
        acked_when_down = len(acked)
        await asyncio.sleep(5.0)
        acked_while_down = len(acked) - acked_when_down
        await asyncio.to_thread(postgres_server.start)
        down.clear()
        started = time.monotonic()
        while len(acked) <= acked_when_down + acked_while_down + 5 and time.monotonic() - started < 60:
            await asyncio.sleep(0.2)
        recovered_s = time.monotonic() - started
        stop.set()
        await task
    finally:
        stop.set()
        if not postgres_server.running:
            postgres_server.start()
        await pool.close()
    assert before > 5
    # an insert in flight when the server died may have been acked just before; none after
    assert acked_while_down <= 1, f"{acked_while_down} readings acked while PostgreSQL was down"
    assert refused_while_down >= 2
    assert "device-peer: storage-failed: reading seq" in caplog.text
    assert recovered_s < 60, "readings were not stored again after PostgreSQL came back"
    print(f"acked before {before}, while down {acked_while_down}, refused while down {refused_while_down}, "
          f"stored again {recovered_s:.1f} s after the restart")
    stored = dict(rows(postgres_dsn))
    assert set(stored) >= acked, f"acked but lost: {sorted(acked - set(stored))}"
    assert set(stored.values()) == {1}
