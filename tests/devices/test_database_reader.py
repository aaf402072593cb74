"""`Database.read`: the console's long reads run on a read-only connection of their own, so they
neither wait for the writer thread nor hold up a reading's commit (real SQLite, WAL)."""

from __future__ import annotations

import asyncio
import sqlite3
import threading

import pytest

from firmware_protocol import SensorReading
from gateway.devices.database import Database
from gateway.devices.reading_list import SqliteReadingList
from gateway.devices.readings import insert_reading

pytestmark = pytest.mark.asyncio(loop_scope="session")
HUMID = (("percent", "%", 45.0),)
HANG_S = 30  # a hang bound only


def _store(conn: sqlite3.Connection, seq: int) -> None:
    insert_reading(conn, "bp-1", SensorReading(seq, "humidity", 0, HUMID), 1_764_547_200.0 + seq)


async def test_a_console_read_goes_on_while_the_writer_thread_is_busy_and_sees_the_last_commit(tmp_path):
    db = Database(tmp_path / "g.db")
    readings = SqliteReadingList(db)
    release = threading.Event()
    try:
        await db.run(_store, 1)
        writer_busy = asyncio.ensure_future(db.run(lambda conn: release.wait(HANG_S)))  # holds the writer thread
        async with asyncio.timeout(HANG_S):
            rows = await readings.recent(None, 100, 0.0)
            kinds = await readings.kinds()
        assert not writer_busy.done()  # the reads did not need the writer thread
        assert [r.seq for r in rows] == [1] and kinds == [("bp-1", "humidity")]
        release.set()
        await writer_busy
        await db.run(_store, 2)
        assert [r.seq for r in await readings.recent(None, 100, 0.0)] == [2, 1]  # the next commit is seen
    finally:
        release.set()
        db.close()


async def test_the_reader_connection_cannot_write(tmp_path):
    db = Database(tmp_path / "g.db")
    try:
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            await db.read(_store, 1)
        assert await db.run(lambda conn: conn.execute("SELECT count(*) FROM readings").fetchone()[0]) == 0
    finally:
        db.close()
