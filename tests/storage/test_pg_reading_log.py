"""The memory's feed source on PostgreSQL: readings in commit order, (xid, id), below the oldest
running transaction, so a reading with a lower id that commits later is not skipped."""

from __future__ import annotations

import psycopg
import pytest

from gateway.config import parse_config
from gateway.storage.pool import open_pool
from gateway.storage.reading_log import PostgresReadingLog
from tests.conftest import ROOT

STORAGE = parse_config({"storage": "postgres"}, ROOT).storage
INSERT = ('INSERT INTO readings (device_id, seq, kind, measured_at, received_at, clock, "values")'
          " VALUES (%s, %s, 'temperature', 1.0, 1.0, 'gateway', '[[\"celsius\", \"°C\", 21.5]]') RETURNING id")


async def test_a_reading_committed_late_is_read_after_the_cursor_passed_a_higher_id(postgres_dsn: str) -> None:
    pool = await open_pool(postgres_dsn, STORAGE)
    try:
        log = PostgresReadingLog(pool)
        with psycopg.connect(postgres_dsn) as slow, psycopg.connect(postgres_dsn, autocommit=True) as fast:
            slow.execute("SELECT pg_current_xact_id()")  # the slow transaction's xid is the older one
            high = fast.execute(INSERT, ("t-fast", 1)).fetchone()[0]  # committed at once
            low_xid_row = slow.execute(INSERT, ("t-slow", 1)).fetchone()[0]  # its id is taken after...
            assert low_xid_row > high  # ...so here the older transaction holds the higher id
            assert await log.after(0, 10) == []  # the committed one waits for the older transaction
            slow.commit()
        got = await log.after(0, 10)
        assert [(r.reading_id, r.device_id) for r in got] == [(low_xid_row, "t-slow"), (high, "t-fast")]
        assert got[0].values == {"celsius": 21.5} and got[0].units == {"celsius": "°C"}
        assert [r.reading_id for r in await log.after(low_xid_row, 10)] == [high]
        assert await log.after(high, 10) == []
        assert await log.last_id() == max(high, low_xid_row)

        with psycopg.connect(postgres_dsn) as slow, psycopg.connect(postgres_dsn, autocommit=True) as fast:
            late = slow.execute(INSERT, ("t-slow", 2)).fetchone()[0]  # lower id, still running
            early = fast.execute(INSERT, ("t-fast", 2)).fetchone()[0]
            assert late < early
            assert await log.after(high, 10) == []  # an id-ordered feed would read `early` and skip `late`
            slow.commit()
        assert [r.reading_id for r in await log.after(high, 10)] == [late, early]
    finally:
        await pool.close()


async def test_a_cursor_whose_reading_is_gone_is_an_error_not_a_guess(postgres_dsn: str) -> None:
    pool = await open_pool(postgres_dsn, STORAGE)
    try:
        with pytest.raises(LookupError, match="reading #99"):
            await PostgresReadingLog(pool).after(99, 10)
    finally:
        await pool.close()
