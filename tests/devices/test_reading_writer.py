"""The readings' writer process (gateway/devices/reading_writer.py): a real child process on real
SQLite. The rows of one loop pass are one batch; a writer that dies fails its batch (nothing
acknowledged) and the next batch starts a new one; Ctrl-C does not stop it; close does."""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3

import pytest

from firmware_protocol import SensorReading
from gateway.devices.database import Database, connect
from gateway.devices.reading_store import StorageFailed
from gateway.devices.reading_writer import ReadingWriter, commit_once
from gateway.devices.readings import reading_row

NOW = 1_764_547_200.0
HUMID = (("percent", "%", 45.0),)


def _row(seq: int, kind: str = "humidity") -> tuple:
    return reading_row("dev-a", SensorReading(seq, kind, 0, HUMID), NOW)


async def _insert(writer: ReadingWriter, rows: list[tuple]) -> list[tuple[int, bool] | BaseException]:
    loop = asyncio.get_running_loop()
    done = [loop.create_future() for _ in rows]
    for row, fut in zip(rows, done):
        writer.insert_then(row, lambda result, exc, fut=fut: fut.set_result(exc if exc is not None else result))
    return list(await asyncio.wait_for(asyncio.gather(*done), 20))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.fixture
def database(tmp_path):
    db = Database(tmp_path / "w.db")  # the schema, as the gateway makes it
    yield tmp_path / "w.db"
    db.close()


async def test_the_rows_of_one_loop_pass_are_one_commit_seen_by_another_connection(database):
    writer = ReadingWriter(database)
    try:
        results = await _insert(writer, [_row(seq) for seq in range(1, 41)] + [_row(7)])
        assert writer.commits == 1 and writer.rows == 41
        assert results[:40] == [(i, True) for i in range(1, 41)] and results[40] == (7, False)  # a duplicate
        other = connect(database)
        assert other.execute("SELECT count(*) FROM readings").fetchone()[0] == 40
        other.close()
        assert writer.pid is not None and writer.pid != os.getpid() and writer.cpu_seconds() >= 0
    finally:
        writer.close()


async def test_a_bad_row_fails_alone(database):
    writer = ReadingWriter(database)
    try:
        rows = [_row(1), _row(2), (*_row(3)[:2], None, *_row(3)[3:]), _row(4)]
        results = await _insert(writer, rows)
        assert isinstance(results[2], StorageFailed) and "NOT NULL" in str(results[2])
        assert [r[1] for r in results[:2] + results[3:]] == [True, True, True]
    finally:
        writer.close()


async def test_a_writer_that_dies_fails_its_batch_and_the_next_batch_starts_a_new_one(database):
    writer = ReadingWriter(database)
    lock = sqlite3.connect(database, isolation_level=None)
    try:
        await _insert(writer, [_row(1)])
        first = writer.pid
        assert first is not None
        lock.execute("BEGIN IMMEDIATE")  # the writer's next batch waits for this lock...
        loop = asyncio.get_running_loop()
        waiting = loop.create_future()
        writer.insert_then(_row(2), lambda result, exc: waiting.set_result(exc if exc is not None else result))
        await asyncio.sleep(0.3)
        assert not waiting.done()
        os.kill(first, signal.SIGKILL)  # ... and dies waiting (a crash, the OOM killer)
        failed = await asyncio.wait_for(waiting, 10)
        assert isinstance(failed, StorageFailed) and "not acknowledged" in str(failed)
        lock.execute("ROLLBACK")
        assert await _insert(writer, [_row(2), _row(3)]) == [(2, True), (3, True)]  # resent: stored once
        assert writer.pid not in (None, first)
    finally:
        lock.close()
        writer.close()


async def test_ctrl_c_and_sigterm_do_not_stop_the_writer_but_close_does(database):
    writer = ReadingWriter(database)
    writer.start()
    pid = writer.pid
    assert pid is not None and await _insert(writer, [_row(1)]) == [(1, True)]  # it serves
    os.kill(pid, signal.SIGINT)  # a Ctrl-C in the gateway's terminal reaches the process group
    os.kill(pid, signal.SIGTERM)  # and `systemctl stop` signals every process of the service
    assert await _insert(writer, [_row(3)]) == [(2, True)]
    assert writer.pid == pid
    writer.close()
    assert writer.pid is None
    async with asyncio.timeout(10):
        while _alive(pid) and not _reaped(pid):
            await asyncio.sleep(0.05)
    assert await _insert(writer, [_row(4)]) == [(3, True)]  # a closed writer starts again when used
    assert writer.pid not in (None, pid)
    writer.close()


def _reaped(pid: int) -> bool:
    try:
        return os.waitpid(pid, os.WNOHANG) != (0, 0)
    except ChildProcessError:
        return True


def test_gateway_doctor_checks_that_the_writer_process_starts_and_commits(database, tmp_path, monkeypatch):
    from gateway.cli.checks import FAIL, OK
    from gateway.cli.doctor import _readings_writer
    from gateway.devices import reading_writer

    assert commit_once(database, [_row(1), _row(1)]) == [(1, True), (1, False)]
    [check] = list(_readings_writer())
    assert check.status == OK, check
    monkeypatch.setattr(reading_writer, "_CHILD", tmp_path / "missing.py")  # a broken install
    [check] = list(_readings_writer())
    assert check.status == FAIL and "missing.py" in check.what and check.fix


async def test_a_writer_that_cannot_start_stops_the_gateway_start_with_a_clear_error(database, monkeypatch):
    from gateway.devices import reading_writer
    from gateway.devices.readings import SqliteReadingStore
    from gateway.errors import GatewayError

    monkeypatch.setattr(reading_writer.sys, "executable", "/nonexistent/python3")
    db = Database(database)
    store = SqliteReadingStore(db)
    with pytest.raises(GatewayError, match="cannot start the readings' writer process .*gateway doctor"):
        await store.start()
    await store.close()
    db.close()
