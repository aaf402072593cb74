"""The readings' writes, and the writer process that runs them (`python -I -S reading_insert.py DB`).

A row is (device_id, seq, kind, measured_at, received_at, clock, values JSON). One device + seq is
one row: a known one is a duplicate (its id, False), a seq at or below the one the retention
pruned for that device is (0, False), a new one (its new id, True). The retention's prune
batches are its too (`prune_batch`), so the readings table has this one writer.

Why a process (gateway/devices/reading_writer.py starts it): a commit with `synchronous=FULL`
waits for the disk, so it cannot run on the event loop; on a thread of the gateway's process it
must take the GIL back after every statement and to say it is done, which on a busy loop costs
more than the INSERT (measured: docs/MQTT.md, "The eighth round"). This process shares no GIL
with the loop: it reads a batch from its stdin, commits it, and writes the results to its stdout,
which the loop watches like any socket.

It imports the standard library only (it runs without site-packages) and ignores SIGINT and
SIGTERM (a Ctrl-C in the gateway's terminal reaches the whole process group, and `systemctl stop`
signals every process of the service): it stops when its stdin closes, i.e. when the gateway
closes it or exits, after the batch it is committing, so a stop never cuts a batch nor logs the
writer's death as an error.

Frames, both ways: u32 big-endian length, then `marshal` data (trusted: our own pipe). Requests:
("insert", rows), answered with one item per row, (row id, new) or the error text of that row;
("prune", cutoff, batch), answered with the count deleted per device or the error text.
"""

from __future__ import annotations

import functools
import marshal
import os
import signal
import sqlite3
import struct
import sys
import time

ROWS_PER_STATEMENT = 256  # a row binds 7 parameters (SQLite's limit: 32,766)
FRAME_LENGTH = struct.Struct(">I")

_INSERT_ONE = (
    'INSERT INTO readings (device_id, seq, kind, measured_at, received_at, clock, "values")'
    " SELECT ?, ?, ?, ?, ?, ?, ?"
    " WHERE NOT EXISTS (SELECT 1 FROM readings_pruned WHERE device_id = ? AND max_seq >= ?)"
    " ON CONFLICT (device_id, seq) DO NOTHING"
)

# readings old enough to prune, but never the newest row (ids must not be reused: retention.py)
PRUNABLE = "received_at < ? AND id < (SELECT max(id) FROM readings)"

Row = tuple[str, int, str, float, float, str, str]
Outcome = tuple[int, bool] | str  # (row id, new) or the error text


def insert_row(conn: sqlite3.Connection, row: Row) -> tuple[int, bool]:
    """Store one row (one statement: a failure leaves nothing behind)."""
    cur = conn.execute(_INSERT_ONE, (*row, row[0], row[1]))
    if cur.rowcount == 1:
        return int(cur.lastrowid or 0), True
    return stored_before(conn, row[0], row[1])


def insert_rows(conn: sqlite3.Connection, rows: list[Row]) -> list[tuple[int, bool]]:
    """`insert_row` for each row, in one statement (at most ROWS_PER_STATEMENT rows): what each
    would return, in order (a device + seq twice: the first is new, the second its duplicate).

    The new rows' ids come without RETURNING: SQLite gives a row inserted without an id the
    table's largest id + 1 (https://sqlite.org/autoinc.html: random ids only once the largest is
    2**63 - 1, and no id is ever given to this table), so the rows of one statement have
    consecutive ids ending at `lastrowid`. When every row was new (the common case) that is the
    whole answer; else each row's id is looked up: an id above `lastrowid` minus the count
    inserted is new, the first time it comes."""
    flat: list[object] = []
    for row in rows:
        flat += row
    cur = conn.execute(_insert_many_sql(len(rows)), flat)
    inserted, last = cur.rowcount, int(cur.lastrowid or 0)
    if inserted == len(rows):
        return [(rid, True) for rid in range(last - inserted + 1, last + 1)]
    first_new = last - inserted + 1 if inserted > 0 else None  # (lastrowid is an older insert's)
    out: list[tuple[int, bool]] = []
    seen: set[int] = set()
    for row in rows:
        rid, _ = stored_before(conn, row[0], row[1])
        out.append((rid, first_new is not None and rid >= first_new and rid not in seen))
        seen.add(rid)
    return out


@functools.lru_cache(maxsize=64)
def _insert_many_sql(count: int) -> str:
    return ('INSERT INTO readings (device_id, seq, kind, measured_at, received_at, clock, "values")'
            " SELECT * FROM (VALUES " + ", ".join(["(?, ?, ?, ?, ?, ?, ?)"] * count) + ") AS v"
            " WHERE NOT EXISTS (SELECT 1 FROM readings_pruned p"
            " WHERE p.device_id = v.column1 AND p.max_seq >= v.column2)"
            " ON CONFLICT (device_id, seq) DO NOTHING")


def stored_before(conn: sqlite3.Connection, device_id: str, seq: int) -> tuple[int, bool]:
    """A row not inserted: (its id, False), or (0, False) when the retention removed it."""
    row = conn.execute("SELECT id FROM readings WHERE device_id = ? AND seq = ?", (device_id, seq)).fetchone()
    if row is None:  # stored once, then removed by the retention: still a duplicate (retention.py)
        return 0, False
    return int(row[0]), False


def commit_batch(conn: sqlite3.Connection, rows: list[Row]) -> list[Outcome]:
    """Commit the rows, durable when this returns (WAL, synchronous=FULL). Up to
    ROWS_PER_STATEMENT rows are one statement, SQLite's own transaction (no BEGIN or COMMIT).
    When it fails SQLite has undone it whole, and the rows go one by one in one transaction, so
    a row that fails (a value SQLite refuses) fails alone. A failure of the transaction itself
    (disk full, I/O error) is every row's error."""
    if len(rows) <= ROWS_PER_STATEMENT:
        try:
            return list(insert_rows(conn, rows))
        except sqlite3.Error:
            if conn.in_transaction:  # (a one-statement batch opens none)
                conn.execute("ROLLBACK")
    out: list[Outcome] = []
    try:
        conn.execute("BEGIN IMMEDIATE")
        for row in rows:
            try:
                out.append(insert_row(conn, row))
            except sqlite3.Error as exc:
                if not conn.in_transaction:  # SQLite ended the transaction (disk full, I/O error)
                    raise
                out.append(f"database error: {exc}")
        conn.execute("COMMIT")
    except sqlite3.Error as exc:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        return [f"database error: {exc}"] * len(rows)
    return out


def prune_batch(conn: sqlite3.Connection, cutoff: float, batch: int) -> dict[str, int]:
    """Delete up to `batch` of the oldest readings received before `cutoff`, in one transaction,
    remembering per device the highest seq deleted (gateway/devices/retention.py). Returns the
    count deleted per device."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute("CREATE TEMP TABLE IF NOT EXISTS prune_ids (id INTEGER PRIMARY KEY)")
        conn.execute("DELETE FROM prune_ids")
        conn.execute(
            f"INSERT INTO prune_ids SELECT id FROM readings WHERE {PRUNABLE} ORDER BY received_at LIMIT ?",
            (cutoff, batch),
        )
        stats = conn.execute(
            "SELECT device_id, COUNT(*), MAX(seq) FROM readings WHERE id IN (SELECT id FROM prune_ids)"
            " GROUP BY device_id"
        ).fetchall()
        conn.executemany(
            "INSERT INTO readings_pruned (device_id, max_seq, pruned, last_pruned_at) VALUES (?, ?, ?, ?)"
            " ON CONFLICT (device_id) DO UPDATE SET max_seq = MAX(max_seq, excluded.max_seq),"
            " pruned = pruned + excluded.pruned, last_pruned_at = excluded.last_pruned_at",
            [(device, max_seq, n, time.time()) for device, n, max_seq in stats],
        )
        conn.execute("DELETE FROM readings WHERE id IN (SELECT id FROM prune_ids)")
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return {device: int(n) for device, n, _ in stats}


def open_database(path: str) -> sqlite3.Connection:
    """The writer's connection: as durable as the gateway's own (database.py `connect`), which
    made the schema and WAL mode before this process starts."""
    conn = sqlite3.connect(path, timeout=10, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("PRAGMA busy_timeout=10000")
    return conn


def _read_exact(fd: int, size: int) -> bytes | None:
    data = b""
    while len(data) < size:
        chunk = os.read(fd, size - len(data))
        if not chunk:
            return None  # the gateway closed our stdin: stop
        data += chunk
    return data


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def answer(conn: sqlite3.Connection, request: tuple) -> object:
    """("insert", rows) -> one Outcome per row; ("prune", cutoff, batch) -> the count deleted
    per device, or the error text."""
    if request[0] == "insert":
        return commit_batch(conn, request[1])
    try:
        return prune_batch(conn, request[1], request[2])
    except sqlite3.Error as exc:
        return f"database error: {exc}"


def serve(conn: sqlite3.Connection, fd_in: int = 0, fd_out: int = 1) -> None:
    """Requests in, answers out, until stdin closes."""
    while (head := _read_exact(fd_in, FRAME_LENGTH.size)) is not None:
        body = _read_exact(fd_in, FRAME_LENGTH.unpack(head)[0])
        if body is None:
            return
        reply = marshal.dumps(answer(conn, marshal.loads(body)))
        _write_all(fd_out, FRAME_LENGTH.pack(len(reply)) + reply)


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if len(argv) != 2:
        print("usage: reading_insert.py DATABASE (started by the gateway)", file=sys.stderr)
        return 2
    conn = open_database(argv[1])
    try:
        serve(conn)
    except BrokenPipeError:  # the gateway is gone
        pass
    finally:
        conn.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
