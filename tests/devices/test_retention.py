"""Readings retention: old readings are pruned in short batches, a pruned seq stays a duplicate,
the periodic task logs counts, and `gateway readings prune` does it by hand (real SQLite)."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from pathlib import Path

import pytest

from firmware_protocol import ReadingStatus, SensorReading
from gateway.bus import EventBus
from gateway.cli import main
from gateway.devices.database import Database, connect
from gateway.devices.readings import ReadingService, SqliteReadingStore, insert_reading, list_readings
from gateway.devices.retention import DAY_S, ReadingRetention, SqlitePruner, count_prunable, prune_readings, prune_with, pruned_through

NOW = 1_764_547_200.0  # 2025-12-01T00:00:00Z
HUMID = (("percent", "%", 45.0),)


def reading(seq: int) -> SensorReading:
    return SensorReading(seq, "humidity", 0, HUMID)


def fill(conn: sqlite3.Connection, device: str, seqs: range, days_ago: float, now: float = NOW) -> None:
    for seq in seqs:
        insert_reading(conn, device, reading(seq), now - days_ago * DAY_S)


@pytest.fixture
def db(tmp_path: Path):
    database = Database(tmp_path / "gateway.db")
    yield database
    database.close()


@pytest.fixture
async def store(db: Database):
    readings = SqliteReadingStore(db)  # its writer process: stopped after the test
    yield readings
    await readings.close()


def test_only_readings_received_before_the_cutoff_are_pruned_batch_by_batch_with_counts_per_device(tmp_path):
    conn = connect(tmp_path / "g.db")
    fill(conn, "hum-1", range(1, 6), days_ago=800)
    fill(conn, "bp-1", range(1, 3), days_ago=731)
    fill(conn, "hum-1", range(6, 9), days_ago=10)
    cutoff = NOW - 730 * DAY_S
    assert count_prunable(conn, cutoff).per_device == {"bp-1": 2, "hum-1": 5}
    assert len(list_readings(conn, limit=100)) == 10  # a dry run deletes nothing
    result = prune_readings(conn, cutoff, batch=3)
    assert (result.per_device, result.total, result.batches) == ({"hum-1": 5, "bp-1": 2}, 7, 3)
    assert sorted(r.seq for r in list_readings(conn, limit=100)) == [6, 7, 8]
    assert (pruned_through(conn, "hum-1"), pruned_through(conn, "bp-1"), pruned_through(conn, "new")) == (5, 2, None)
    assert prune_readings(conn, cutoff).total == 0
    conn.close()


async def test_a_resend_of_a_pruned_reading_is_acked_duplicate_and_not_stored_again(db, store, caplog):
    await db.run(fill, "hum-1", range(1, 4), 800)
    await prune_with(SqlitePruner(store.writer), NOW - 730 * DAY_S)
    service = ReadingService(store, EventBus(), clock=lambda: NOW)
    with caplog.at_level(logging.INFO):
        assert (await service.handle("hum-1", "peer-h", reading(2))).status == ReadingStatus.DUPLICATE
    assert "peer-h: reading seq 2 was stored before and pruned by the retention" in caplog.text
    assert (await service.handle("hum-1", "peer-h", reading(4))).status == ReadingStatus.STORED  # the next seq
    assert (await service.handle("hum-1", "peer-h", reading(4))).status == ReadingStatus.DUPLICATE  # as before
    assert (await service.handle("other", "peer-o", reading(2))).status == ReadingStatus.STORED  # per device
    # seq 3, the newest row, was kept (ids are never handed out again, see the next test)
    assert sorted((r.device_id, r.seq) for r in await db.run(list_readings)) == [("hum-1", 3), ("hum-1", 4), ("other", 2)]


def test_the_newest_reading_is_never_pruned_so_a_reading_id_is_never_given_twice(tmp_path):
    conn = connect(tmp_path / "g.db")
    fill(conn, "hum-1", range(1, 6), days_ago=800)
    assert count_prunable(conn, NOW).total == 4
    assert prune_readings(conn, NOW).total == 4
    assert [(r.reading_id, r.seq) for r in list_readings(conn)] == [(5, 5)]
    assert insert_reading(conn, "hum-1", reading(6), NOW) == (6, True)  # not id 1 again: the memory fed up to 5
    conn.close()


async def test_a_late_reading_below_the_pruned_seq_that_is_still_stored_is_kept_by_a_later_prune(db, store):
    await db.run(fill, "hum-1", range(1, 3), 800)
    await db.run(fill, "hum-1", range(5, 6), 800)
    await db.run(fill, "hum-1", range(3, 4), 1)  # seq 3 arrived late, yesterday
    await prune_with(SqlitePruner(store.writer), NOW - 730 * DAY_S)
    assert [r.seq for r in await db.run(list_readings)] == [3]
    service = ReadingService(store, EventBus(), clock=lambda: NOW)
    assert (await service.handle("hum-1", "p", reading(3))).status == ReadingStatus.DUPLICATE
    assert len(await db.run(list_readings)) == 1


async def test_readings_arriving_during_a_long_prune_are_stored_between_its_batches(db, store):
    await db.run(fill, "old", range(1, 3001), 800)
    service = ReadingService(store, EventBus(), clock=lambda: NOW)
    await service.handle("live", "p", reading(1))  # the writer process is up
    prune = asyncio.create_task(prune_with(SqlitePruner(store.writer), NOW - 730 * DAY_S, batch=100))
    await asyncio.sleep(0)  # let the prune submit its first batch
    acks = [await service.handle("live", "p", reading(seq)) for seq in range(2, 5)]
    assert [a.status for a in acks] == [ReadingStatus.STORED] * 3
    assert not prune.done()  # the three writes did not wait for the whole prune
    result = await asyncio.wait_for(prune, 30)
    assert result.total == 3000 and result.batches == 30
    assert sorted(r.seq for r in await db.run(list_readings)) == [1, 2, 3, 4]


async def test_the_periodic_retention_prunes_at_start_and_logs_the_counts(db, store, caplog):
    await db.run(fill, "hum-1", range(1, 4), 31)
    await db.run(fill, "hum-1", range(4, 6), 29)
    retention = ReadingRetention(SqlitePruner(store.writer), 30, clock=lambda: NOW)
    with caplog.at_level(logging.INFO, logger="gateway.devices.retention"):
        task = asyncio.create_task(retention.run())
        try:
            await asyncio.wait_for(retention.done.wait(), 10)
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
    assert retention.passes == 1 and retention.last is not None and retention.last.total == 3
    assert "readings retention (30 days): pruned 3 readings received before 2025-11-01" in caplog.text
    assert "(per device: hum-1 3)" in caplog.text
    assert sorted(r.seq for r in await db.run(list_readings)) == [4, 5]


async def test_a_failing_prune_is_logged_and_the_task_keeps_running(db, store, caplog):
    await db.run(fill, "hum-1", range(1, 3), 31)
    await db.run(lambda conn: conn.execute("DROP TABLE readings_pruned"))  # the prune's write fails
    retention = ReadingRetention(SqlitePruner(store.writer), 30, clock=lambda: NOW, interval_s=3600)
    task = asyncio.create_task(retention.run())
    try:
        await asyncio.wait_for(retention.done.wait(), 10)
        assert retention.failures == 1 and "readings retention: pruning failed" in caplog.text
        assert not task.done()
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert len(await db.run(list_readings)) == 2  # the failed batch was rolled back


def _config(tmp_path: Path, retention: int = 0) -> Path:
    cfg = tmp_path / "gateway.yaml"
    cfg.write_text(f"devices:\n  database: {tmp_path / 'g.db'}\n  readings_retention_days: {retention}\n")
    return cfg


def test_readings_prune_cli_dry_run_counts_and_prune_deletes(tmp_path, capsys):
    import time

    conn = connect(tmp_path / "g.db")
    fill(conn, "hum-1", range(1, 5), 40, now=time.time())
    fill(conn, "hum-1", range(5, 7), 1, now=time.time())
    conn.close()
    cfg = _config(tmp_path)
    assert main(["readings", "prune", "--config", str(cfg)]) == 2
    assert "devices.readings_retention_days is 0" in capsys.readouterr().err
    assert main(["readings", "prune", "--older-than", "30", "--dry-run", "--config", str(cfg)]) == 0
    assert "would prune 4 readings" in capsys.readouterr().out
    assert main(["readings", "prune", "--config", str(_config(tmp_path, 30))]) == 0
    out = capsys.readouterr().out
    assert "pruned 4 readings" in out and "(per device: hum-1 4)" in out
    conn = connect(tmp_path / "g.db")
    assert sorted(r.seq for r in list_readings(conn)) == [5, 6]
    conn.close()


@pytest.mark.asyncio(loop_scope="session")
async def test_a_gateway_with_a_retention_prunes_at_start_and_one_without_keeps_everything(fake_runner, tmp_path):
    import time

    from gateway.app import Gateway
    from gateway.config import parse_config
    from gateway.links.memory import MemoryLink
    from tests.conftest import ROOT

    conn = connect(tmp_path / "g.db")
    fill(conn, "hum-1", range(1, 4), 400, now=time.time())
    fill(conn, "hum-1", range(4, 6), 1, now=time.time())
    conn.close()
    keep = Gateway(parse_config({"devices": {"database": str(tmp_path / "g.db")}}, ROOT), fake_runner, [MemoryLink()])
    assert keep.retention is None  # the default, 0: keep forever
    keep.db.close()
    cfg = parse_config({"devices": {"database": str(tmp_path / "g.db"), "readings_retention_days": 365}}, ROOT)
    gateway = Gateway(cfg, fake_runner, [MemoryLink()])
    task = asyncio.create_task(gateway.serve())
    try:
        await asyncio.wait_for(gateway.retention.done.wait(), 10)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert gateway.retention.last.per_device == {"hum-1": 3}
    assert sorted(r.seq for r in await gateway.db.run(list_readings)) == [4, 5]
