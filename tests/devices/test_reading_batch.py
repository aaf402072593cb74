"""The readings of one commit in one INSERT (`insert_readings`, `Database.grouped(..., batch=)`):
each gets what one `insert_reading` call would give it, and a batch that fails is undone and its
calls run one by one (real SQLite)."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from firmware_protocol import SensorReading
from gateway.devices.database import Database, _in_one_transaction, connect
from gateway.devices.readings import insert_reading, insert_readings

NOW = 1_764_547_200.0
HUMID = (("percent", "%", 45.0),)


def _reading(seq: int, measured_at: int = 0) -> SensorReading:
    return SensorReading(seq, "humidity", measured_at, HUMID)


def _database(path: Path) -> sqlite3.Connection:
    conn = connect(path)
    insert_reading(conn, "dev-a", _reading(10), NOW)  # stored before
    conn.execute("INSERT INTO readings_pruned (device_id, max_seq) VALUES ('dev-b', 3)")  # pruned up to 3
    return conn


CALLS = [("dev-a", _reading(11, 1_764_547_000), NOW), ("dev-a", _reading(10), NOW), ("dev-b", _reading(2), NOW),
         ("dev-b", _reading(4), NOW + 1), ("dev-a", _reading(11), NOW + 2), ("dev-c", _reading(1), NOW)]


def test_a_batch_of_readings_is_one_insert_and_each_gets_what_its_own_insert_would(tmp_path):
    one_by_one = _database(tmp_path / "one.db")
    batched = _database(tmp_path / "batch.db")
    statements: list[str] = []
    batched.set_trace_callback(statements.append)
    expected = [insert_reading(one_by_one, *call) for call in CALLS]
    assert expected == [(2, True), (1, False), (0, False), (3, True), (2, False), (4, True)]  # new, known,
    assert insert_readings(batched, CALLS) == expected  # pruned, new, the batch's own duplicate, new
    assert sum(s.startswith("INSERT") for s in statements) == 1
    rows = 'SELECT id, device_id, seq, kind, measured_at, received_at, clock, "values" FROM readings ORDER BY id'
    assert batched.execute(rows).fetchall() == one_by_one.execute(rows).fetchall()


def _put(conn: sqlite3.Connection, key: str) -> int:
    cur = conn.execute("INSERT INTO devices (device_id, token_hash, created_at) VALUES (?, '', 0)", (key,))
    return int(cur.lastrowid or 0)


def _put_one_statement(conn: sqlite3.Connection, calls: list[tuple[str]]) -> list[int]:
    """One INSERT for all: a duplicate key fails the whole statement, which SQLite undoes alone."""
    rows = ", ".join(["(?, '', 0)"] * len(calls))
    ids = conn.execute(f"INSERT INTO devices (device_id, token_hash, created_at) VALUES {rows} RETURNING rowid",
                       [key for (key,) in calls]).fetchall()
    return [int(rid) for (rid,) in ids]


@pytest.mark.parametrize("one_statement", [False, True])
async def test_a_batch_that_fails_is_undone_and_its_calls_run_alone_so_only_the_bad_one_fails(tmp_path, one_statement):
    """A batch of several statements is undone by its savepoint; one of one statement (its calls
    `one_write`, as the readings') by SQLite, without one."""
    batches: list[int] = []

    def put_many(conn: sqlite3.Connection, calls: list[tuple[str]]) -> list[int]:
        batches.append(len(calls))
        if one_statement:
            return _put_one_statement(conn, calls)
        return [_put(conn, key) for (key,) in calls]  # the duplicate key raises after others went in

    db = Database(tmp_path / "b.db")
    try:
        keys = [f"dev-{i}" for i in range(10)] + ["dev-3"] + [f"dev-{i}" for i in range(10, 20)]
        results = await asyncio.gather(*(db.grouped(_put, key, one_write=one_statement, batch=put_many)
                                         for key in keys), return_exceptions=True)
        assert batches == [len(keys)]  # one batch for the calls of one loop pass
        assert isinstance(results[10], sqlite3.IntegrityError)
        assert all(isinstance(r, int) for r in results[:10] + results[11:])
        other = connect(tmp_path / "b.db")  # committed; the failed batch's rows were undone, not kept twice
        assert other.execute("SELECT count(*) FROM devices").fetchone()[0] == 20
        other.close()
    finally:
        db.close()


def test_a_commit_of_new_readings_is_one_statement_and_their_ids_are_the_rows(tmp_path):
    """The group is one INSERT, SQLite's own transaction (no BEGIN, no COMMIT, no savepoint, no
    RETURNING rows), committed when it returns; the ids given back are the rows' own."""
    conn = _database(tmp_path / "new.db")
    statements: list[str] = []
    conn.set_trace_callback(statements.append)
    calls = [(insert_reading, ("dev-a", _reading(seq), NOW), True, insert_readings) for seq in range(20, 32)]
    outcomes = _in_one_transaction(conn, calls)
    assert [s.split()[0] for s in statements] == ["INSERT"] and "RETURNING" not in statements[0]
    assert not conn.in_transaction
    other = connect(tmp_path / "new.db")  # committed: another connection sees every row
    ids = dict(other.execute("SELECT seq, id FROM readings WHERE device_id = 'dev-a'").fetchall())
    other.close()
    assert outcomes == [(True, (ids[seq], True)) for seq in range(20, 32)]
