"""The readings of one commit in one INSERT (`reading_insert.commit_batch`, what the writer process
runs): each gets what one `insert_reading` call would give it, and a batch that fails is undone
and its rows go one by one, so only the bad one fails (real SQLite)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from firmware_protocol import SensorReading
from gateway.devices.database import connect
from gateway.devices.reading_insert import commit_batch
from gateway.devices.readings import insert_reading, insert_readings, reading_row

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
ROWS = 'SELECT id, device_id, seq, kind, measured_at, received_at, clock, "values" FROM readings ORDER BY id'


def test_a_batch_of_readings_is_one_insert_and_each_gets_what_its_own_insert_would(tmp_path):
    one_by_one = _database(tmp_path / "one.db")
    batched = _database(tmp_path / "batch.db")
    statements: list[str] = []
    batched.set_trace_callback(statements.append)
    expected = [insert_reading(one_by_one, *call) for call in CALLS]
    assert expected == [(2, True), (1, False), (0, False), (3, True), (2, False), (4, True)]  # new, known,
    assert insert_readings(batched, CALLS) == expected  # pruned, new, the batch's own duplicate, new
    assert sum(s.startswith("INSERT") for s in statements) == 1
    assert batched.execute(ROWS).fetchall() == one_by_one.execute(ROWS).fetchall()


def test_a_batch_that_fails_is_undone_and_its_rows_go_alone_so_only_the_bad_one_fails(tmp_path):
    conn = _database(tmp_path / "b.db")
    rows = [reading_row("dev-a", _reading(seq), NOW) for seq in range(20, 30)]
    rows[4] = (*rows[4][:2], None, *rows[4][3:])  # no kind: NOT NULL refuses it, and the statement
    statements: list[str] = []
    conn.set_trace_callback(statements.append)
    outcomes = commit_batch(conn, rows)
    assert isinstance(outcomes[4], str) and "NOT NULL" in outcomes[4]
    assert all(isinstance(o, tuple) and o[1] for o in outcomes[:4] + outcomes[5:])
    assert statements[1] == "BEGIN IMMEDIATE" and statements[-1] == "COMMIT"  # the batch, then one by one
    other = connect(tmp_path / "b.db")  # committed, each once: the failed batch's rows were undone
    seqs = [seq for (seq,) in other.execute("SELECT seq FROM readings WHERE device_id = 'dev-a' AND seq >= 20")]
    other.close()
    assert sorted(seqs) == [20, 21, 22, 23, 25, 26, 27, 28, 29]


def test_a_commit_of_new_readings_is_one_statement_and_their_ids_are_the_rows(tmp_path):
    """The batch is one INSERT, SQLite's own transaction (no BEGIN, no COMMIT, no savepoint, no
    RETURNING rows), committed when it returns; the ids given back are the rows' own."""
    conn = _database(tmp_path / "new.db")
    statements: list[str] = []
    conn.set_trace_callback(statements.append)
    outcomes = commit_batch(conn, [reading_row("dev-a", _reading(seq), NOW) for seq in range(20, 32)])
    assert [s.split()[0] for s in statements] == ["INSERT"] and "RETURNING" not in statements[0]
    assert not conn.in_transaction
    other = connect(tmp_path / "new.db")  # committed: another connection sees every row
    ids = dict(other.execute("SELECT seq, id FROM readings WHERE device_id = 'dev-a'").fetchall())
    other.close()
    assert outcomes == [(ids[seq], True) for seq in range(20, 32)]


def test_a_failed_transaction_is_every_rows_error(tmp_path):
    conn = _database(tmp_path / "ro.db")
    conn.close()
    readonly = sqlite3.connect(f"file:{tmp_path / 'ro.db'}?mode=ro", uri=True, isolation_level=None)
    outcomes = commit_batch(readonly, [reading_row("dev-a", _reading(seq), NOW) for seq in (40, 41)])
    assert len(outcomes) == 2 and all(isinstance(o, str) and "readonly" in o for o in outcomes)
