"""Readings retention on a real PostgreSQL: old readings go in bounded batches, but never one the
memory's feed has not consumed (nor the cursor's own row); a resent pruned seq is DUPLICATE, also
when the resend races the prune; two gateways on one database: one of them prunes."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import psycopg

from firmware_protocol import ReadingStatus, SensorReading
from gateway.app import build_gateway
from gateway.bus import EventBus
from gateway.config import parse_config
from gateway.devices.readings import ReadingService
from gateway.devices.retention import DAY_S, ReadingRetention
from gateway.storage.pool import open_pool
from gateway.storage.readings import PostgresReadingStore
from gateway.storage.retention import PostgresPruner
from tests.conftest import ROOT

STORAGE = parse_config({"storage": {"backend": "postgres", "connect_timeout_s": 2, "pool_size": 4}}, ROOT).storage
NOW = 1_764_547_200.0  # 2025-12-01
HUMID = (("percent", "%", 40.0),)


def reading(seq: int) -> SensorReading:
    return SensorReading(seq, "humidity", 0, HUMID)


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def seqs(dsn: str) -> list[int]:
    with psycopg.connect(dsn) as conn:
        return [s for (s,) in conn.execute("SELECT seq FROM readings WHERE device_id = 'hum-1' ORDER BY seq")]


def set_cursor(dsn: str, seq: int) -> None:
    """The memory's feed has consumed everything up to this seq's reading (its cursor)."""
    with psycopg.connect(dsn) as conn:
        conn.execute("UPDATE feed_cursors SET position = (SELECT id FROM readings WHERE device_id = 'hum-1'"
                     " AND seq = %s) WHERE name = 'readings'", (seq,))


async def test_retention_deletes_only_old_readings_the_feed_consumed_and_a_resent_old_seq_is_still_duplicate(
        postgres_dsn: str) -> None:
    pool = await open_pool(postgres_dsn, STORAGE)
    try:
        clock = Clock(NOW - 40 * DAY_S)
        service = ReadingService(PostgresReadingStore(pool), EventBus(), clock=clock)
        for seq in range(1, 11):  # 1-8 received 40 days ago, 9-10 today
            clock.now = NOW - 40 * DAY_S + seq if seq <= 8 else NOW + seq
            assert (await service.handle("hum-1", "p", reading(seq))).status == ReadingStatus.STORED
        set_cursor(postgres_dsn, 5)  # the feed has turned 1-5 into memories, not 6-10
        retention = ReadingRetention(PostgresPruner(pool, feeds_memory=True), 30, clock=lambda: NOW, batch=2)
        result = await retention.prune_once()
        assert result.per_device == {"hum-1": 4} and result.batches == 2  # batches of at most 2
        assert seqs(postgres_dsn) == [5, 6, 7, 8, 9, 10]  # the cursor's row and the unfed readings stay
        with psycopg.connect(postgres_dsn) as conn:
            assert conn.execute("SELECT max_seq, pruned FROM readings_pruned WHERE device_id = 'hum-1'").fetchone() == (4, 4)
        clock.now = NOW + 20
        for seq in (1, 3, 4):  # resent after the prune: stored once and expired, so a duplicate
            assert (await service.handle("hum-1", "p", reading(seq))).status == ReadingStatus.DUPLICATE
        assert seqs(postgres_dsn) == [5, 6, 7, 8, 9, 10]

        set_cursor(postgres_dsn, 10)  # the feed caught up
        result = await retention.prune_once()
        assert result.per_device == {"hum-1": 4} and seqs(postgres_dsn) == [9, 10]  # 5-8 old and fed; 9, 10 new
        for seq in (5, 8):
            assert (await service.handle("hum-1", "p", reading(seq))).status == ReadingStatus.DUPLICATE
        assert (await service.handle("hum-1", "p", reading(11))).status == ReadingStatus.STORED
        assert (await service.handle("hum-1", "p", reading(11))).status == ReadingStatus.DUPLICATE
        assert seqs(postgres_dsn) == [9, 10, 11]
    finally:
        await pool.close()


async def test_before_the_feed_consumed_anything_only_a_gateway_without_the_memory_prunes_by_age(
        postgres_dsn: str) -> None:
    pool = await open_pool(postgres_dsn, STORAGE)
    try:
        clock = Clock(NOW - 40 * DAY_S)
        service = ReadingService(PostgresReadingStore(pool), EventBus(), clock=clock)
        for seq in (1, 2, 3):
            assert (await service.handle("hum-1", "p", reading(seq))).status == ReadingStatus.STORED
        with_memory = ReadingRetention(PostgresPruner(pool, feeds_memory=True), 30, clock=lambda: NOW)
        assert (await with_memory.prune_once()).total == 0  # cursor 0: the memory may be about to feed them
        without = ReadingRetention(PostgresPruner(pool, feeds_memory=False), 30, clock=lambda: NOW)
        assert (await without.prune_once()).total == 3
        assert seqs(postgres_dsn) == []
        assert (await service.handle("hum-1", "p", reading(2))).status == ReadingStatus.DUPLICATE
    finally:
        await pool.close()


async def test_a_resend_racing_the_prune_of_its_seq_is_duplicate_not_stored_again(postgres_dsn: str) -> None:
    pool = await open_pool(postgres_dsn, STORAGE)
    try:
        store = PostgresReadingStore(pool)
        reading_id, new = await store.insert("hum-1", reading(3), NOW - 40 * DAY_S)
        assert new
        async with await psycopg.AsyncConnection.connect(postgres_dsn) as pruning:
            # the prune's transaction (what PostgresPruner's one statement does) is under way ...
            await pruning.execute("DELETE FROM readings WHERE id = %s", (reading_id,))
            await pruning.execute("INSERT INTO readings_pruned (device_id, max_seq, pruned, last_pruned_at)"
                                  " VALUES ('hum-1', 3, 1, %s)", (NOW,))
            resend = asyncio.create_task(store.insert("hum-1", reading(3), NOW))  # ... when the seq is resent
            await asyncio.sleep(0.5)
            assert not resend.done()  # the insert waits for the prune's delete of its seq
            await pruning.commit()
        assert await asyncio.wait_for(resend, 10) == (0, False)  # DUPLICATE: pruned, not stored again
        assert seqs(postgres_dsn) == []
    finally:
        await pool.close()


def _config(tmp_path: Path) -> dict:
    return {"server": {"host": "127.0.0.1", "websocket_port": 0}, "storage": {"backend": "postgres", "connect_timeout_s": 3},
            "devices": {"database": str(tmp_path / "gateway.db"), "readings_retention_days": 30},
            "mqtt": {"enabled": False}, "coap": {"enabled": False}, "screens": {"enabled": False},
            "xiaozhi": {"enabled": False}, "memory": {"enabled": False}}


async def test_two_gateways_on_one_postgres_one_of_them_prunes_the_shared_readings(
        tmp_path: Path, postgres_dsn: str, fake_runner, monkeypatch) -> None:
    monkeypatch.setenv("GATEWAY_PG_DSN", postgres_dsn)
    pool = await open_pool(postgres_dsn, STORAGE)
    try:
        store = PostgresReadingStore(pool)
        for seq in (1, 2):  # received long ago through some gateway
            await store.insert("hum-1", reading(seq), NOW - 400 * DAY_S)
        await store.insert("hum-1", reading(3), time.time())
    finally:
        await pool.close()
    gateways, tasks = [], []
    try:
        for name in ("a", "b"):
            (tmp_path / name).mkdir()
            (tmp_path / name / "gateway.yaml").write_text(json.dumps(_config(tmp_path / name)))
            gateway = build_gateway(parse_config(_config(tmp_path / name), ROOT), fake_runner, lambda line: None)
            ready = asyncio.Event()
            tasks.append(asyncio.create_task(gateway.serve(ready)))
            await asyncio.wait_for(ready.wait(), 60)
            gateways.append(gateway)
        async with asyncio.timeout(30):
            # the pass is counted after its last (empty) batch, a moment after the rows are gone
            while (seqs(postgres_dsn) != [3] or not any(g.postgres.retention_job.leading for g in gateways)
                   or not any(g.retention.passes for g in gateways)):
                await asyncio.sleep(0.2)
        assert sorted(g.postgres.retention_job.leading for g in gateways) == [False, True]
        assert sum(g.retention.passes for g in gateways) == 1  # one pass, by the lock's holder
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
