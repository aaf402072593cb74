"""The gateway's SQLite database (device registry + sensor readings): schema and one writer.

Every access from the asyncio side goes through `Database.run`, which executes on one dedicated
thread that owns the connection, so there is exactly one writer and the event loop never blocks
on the disk. Long reads that write nothing (the console's readings page: thousands of rows, every
few seconds) go through `Database.read` instead, on a thread and read-only connection of their
own, so they never hold up a reading's commit or a device's login on the writer thread. The CLI
uses `connect()` directly (it is not async).

WAL mode lets the CLI read while the gateway writes; `synchronous=FULL` makes a committed
transaction durable on disk before `run` returns, so an acknowledged reading survives a crash or
a power cut, not only a killed process.

`run_grouped` is for many small writes that each must be durable before they are answered (a
sensor reading before its ack): the calls that arrive while a transaction is being committed
wait for the next one and share its commit, so a burst of readings costs one fsync, not one each;
calls that can be batched (`grouped(..., batch=)`: the readings) also share one statement.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")
# many grouped calls' writes in one statement: (conn, [args, ...]) -> their results (`Database.grouped`)
Batch = Callable[[sqlite3.Connection, list[tuple[Any, ...]]], list[Any]]
Call = tuple[Callable[..., Any], tuple[object, ...], bool, Batch | None]  # fn, args, one_write, batch
Settled = Callable[[Any, BaseException | None], None]  # then(result, None) or then(None, exception)
BATCH_CALLS = 256  # calls per batched statement at most (a reading binds 7 parameters)

SCHEMA = """
CREATE TABLE IF NOT EXISTS devices (
    device_id   TEXT PRIMARY KEY,
    token_hash  TEXT NOT NULL,
    name        TEXT NOT NULL DEFAULT '',
    created_at  REAL NOT NULL,
    last_seen   REAL,
    broker_hash TEXT,  -- the token as the embedded mosquitto's password file has it (broker_password.py)
    client_hash TEXT,  -- SHA-256 of the Client-Id a xiaozhi box is bound to (auth.py enrol_box)
    open_enrolled INTEGER NOT NULL DEFAULT 0  -- 1: created by its own OTA request (open enrolment)
);
CREATE TABLE IF NOT EXISTS readings (
    id          INTEGER PRIMARY KEY,
    device_id   TEXT NOT NULL,
    seq         INTEGER NOT NULL,
    kind        TEXT NOT NULL,
    measured_at REAL NOT NULL,
    received_at REAL NOT NULL,
    clock       TEXT NOT NULL,
    "values"    TEXT NOT NULL,
    UNIQUE (device_id, seq)
);
CREATE INDEX IF NOT EXISTS readings_by_time ON readings (received_at);
-- per device, the highest seq removed by the retention (gateway/devices/retention.py), so a
-- resend of a pruned reading is still recognised as a duplicate
CREATE TABLE IF NOT EXISTS readings_pruned (
    device_id      TEXT PRIMARY KEY,
    max_seq        INTEGER NOT NULL,
    pruned         INTEGER NOT NULL DEFAULT 0,
    last_pruned_at REAL
);
-- boxes waiting for their owner's approval (gateway/devices/activation.py); added after the
-- first release: CREATE ... IF NOT EXISTS is the migration of an older database
CREATE TABLE IF NOT EXISTS activations (
    device_id   TEXT PRIMARY KEY,
    code        TEXT NOT NULL UNIQUE,
    challenge   TEXT NOT NULL,
    details     TEXT NOT NULL DEFAULT '',
    created_at  REAL NOT NULL,
    expires_at  REAL NOT NULL,
    approved_at REAL,
    client_hash TEXT  -- SHA-256 of the Client-Id the code was given to: only it claims the token
);
-- the person each device belongs to, set from the console (gateway/devices/people.py); it
-- overrides memory.users of gateway.yaml for that device
CREATE TABLE IF NOT EXISTS device_people (
    device_id   TEXT PRIMARY KEY,
    person      TEXT NOT NULL,  -- a memory user id; '' = the device's own memory
    updated_at  REAL NOT NULL
);
"""


def connect(path: Path) -> sqlite3.Connection:
    """Open (creating if needed) the database with the schema, WAL and durable commits."""
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, timeout=10, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("PRAGMA busy_timeout=10000")
    conn.executescript(SCHEMA)
    columns = {row[1] for row in conn.execute("PRAGMA table_info(devices)")}
    if "broker_hash" not in columns:  # a database from before the embedded mosquitto
        conn.execute("ALTER TABLE devices ADD COLUMN broker_hash TEXT")
    if "client_hash" not in columns:  # a database from before the Client-Id binding: bound at next OTA
        conn.execute("ALTER TABLE devices ADD COLUMN client_hash TEXT")
        conn.execute("ALTER TABLE devices ADD COLUMN open_enrolled INTEGER NOT NULL DEFAULT 0")
    if "client_hash" not in {row[1] for row in conn.execute("PRAGMA table_info(activations)")}:
        conn.execute("ALTER TABLE activations ADD COLUMN client_hash TEXT")  # codes from before: any claims
    return conn


class Database:
    """One connection used only from one executor thread: the single writer."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sqlite")
        self._conn = self._executor.submit(connect, path).result()
        self._group: list[tuple[Callable[..., Any], tuple[object, ...], bool, Batch | None, Settled,
                                Callable[[Exception], Exception] | None]] = []
        self._committing = False  # a grouped transaction is on the database thread
        self.group_commits = 0  # grouped transactions committed (the calls they held: grouped_calls)
        self.grouped_calls = 0
        self._reader = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sqlite-read")
        self._read_conn: sqlite3.Connection | None = None  # opened on the reader thread at its first read

    async def run(self, fn: Callable[..., T], *args: object) -> T:
        """Run `fn(conn, *args)` on the database thread."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, fn, self._conn, *args)

    async def read(self, fn: Callable[..., T], *args: object) -> T:
        """Run `fn(conn, *args)` on the reader thread with a read-only connection (WAL: it sees the
        last commit, and neither waits for the writer nor holds it up). `fn` must not write."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._reader, self._on_reader, fn, args)

    def _on_reader(self, fn: Callable[..., T], args: tuple[object, ...]) -> T:
        if self._read_conn is None:
            self._read_conn = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, timeout=10,
                                              isolation_level=None, check_same_thread=False)
            self._read_conn.execute("PRAGMA busy_timeout=10000")
        return fn(self._read_conn, *args)

    async def run_grouped(self, fn: Callable[..., T], *args: object, one_write: bool = False) -> T:
        """Run `fn(conn, *args)` on the database thread in one transaction with the other grouped
        calls queued meanwhile (each in a savepoint: a call that raises is rolled back alone and
        raises here); returns once that transaction is committed. `fn` must not commit itself.
        `one_write`: `fn` writes with one statement at most, which SQLite undoes alone when it
        fails, so it needs no savepoint of its own (and so does `batch`, see `grouped`)."""
        return await self.grouped(fn, *args, one_write=one_write)

    def grouped(self, fn: Callable[..., T], *args: object, one_write: bool = False,
                error: Callable[[Exception], Exception] | None = None, batch: Batch | None = None
                ) -> asyncio.Future[T]:
        """`run_grouped` as a future, for callers that go on without a task per call (the readings
        of an MQTT session); `error` turns what the call or the commit raised into what the
        future raises. `batch(conn, [args, ...])`: what `fn` does for each of the group's calls of
        this `batch` in a row, in one statement, returning their results in order (the readings of
        a commit: one INSERT, not one each); when it raises it is undone and the calls run one by
        one through `fn`, so one that fails fails alone. With `one_write`, `batch` too writes with
        one statement at most and raises only from it (SQLite undoes it alone; no savepoint)."""
        done: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self.grouped_then(fn, *args, then=partial(_settle_future, done), one_write=one_write, error=error, batch=batch)
        return done

    def grouped_then(self, fn: Callable[..., Any], *args: object, then: Settled, one_write: bool = False,
                     error: Callable[[Exception], Exception] | None = None, batch: Batch | None = None) -> None:
        """`grouped` without a future: `then(result, None)` or `then(None, exception)` is called
        in the loop pass that settles the transaction, so a reading's ack is made in that pass,
        not in a done-callback one pass later (the readings of an MQTT session)."""
        loop = asyncio.get_running_loop()
        self._group.append((fn, args, one_write, batch, then, error))
        if not self._committing:  # started at the end of this loop pass: the calls made in the
            self._committing = True  # same pass (a batch of MQTT readings) share the transaction
            loop.call_soon(self._commit_group, loop)

    def _commit_group(self, loop: asyncio.AbstractEventLoop) -> None:
        group, self._group = self._group, []
        self._committing = True
        calls = [(fn, args, one_write, batch) for fn, args, one_write, batch, _, _ in group]
        try:
            committed = self._executor.submit(_in_one_transaction, self._conn, calls)
        except RuntimeError as exc:  # closed since the call was queued: its caller hears so
            self._committing = False
            for *_, then, error in group:
                then(None, error(exc) if error is not None else exc)
            return

        def settle(committed: Future[list[tuple[bool, Any]]]) -> None:
            self._committing = False
            self.group_commits += 1
            self.grouped_calls += len(group)
            failed = committed.exception()
            outcomes = committed.result() if failed is None else None
            for i, (*_, then, error) in enumerate(group):
                outcome = failed if outcomes is None else outcomes[i][1]
                try:  # (a caller's bug must not keep the others waiting)
                    if isinstance(outcome, BaseException):
                        then(None, error(outcome) if error is not None and isinstance(outcome, Exception) else outcome)
                    else:
                        then(outcome, None)
                except Exception as exc:
                    loop.call_exception_handler({"message": "a grouped call's callback failed", "exception": exc})
            if self._group:
                self._commit_group(loop)

        def settle_soon(committed: Future[list[tuple[bool, Any]]]) -> None:
            try:  # from the database thread: the callers hear it in the loop's next pass
                loop.call_soon_threadsafe(settle, committed)
            except RuntimeError:  # the loop is closed: nobody waits for these calls any more
                pass

        committed.add_done_callback(settle_soon)  # (not run_in_executor: one loop pass less)

    def close(self) -> None:
        self._reader.submit(self._close_reader).result()
        self._reader.shutdown(wait=True)
        self._executor.submit(self._conn.close).result()
        self._executor.shutdown(wait=True)

    def _close_reader(self) -> None:
        if self._read_conn is not None:
            self._read_conn.close()
            self._read_conn = None


def _settle_future(done: asyncio.Future[Any], result: Any, exc: BaseException | None) -> None:
    if done.done():  # its caller was cancelled
        return
    if exc is not None:
        done.set_exception(exc)
    else:
        done.set_result(result)


def _in_one_transaction(conn: sqlite3.Connection, calls: list[Call]) -> list[tuple[bool, Any]]:
    """(True, result) or (False, the exception) per call, all committed together.

    A group that is one batch of `one_write` calls (the readings of a commit) is one statement:
    it runs on its own, as SQLite's own transaction (durable as any commit: synchronous=FULL),
    without BEGIN and COMMIT, two statements less, each a round of the GIL between this thread
    and the event loop. When it fails SQLite has undone it whole, and the calls run one by one in
    a transaction as below, so one that fails fails alone."""
    batch = calls[0][3]
    if batch is not None and len(calls) <= BATCH_CALLS and all(c[3] is batch and c[2] for c in calls):
        try:
            return [(True, result) for result in batch(conn, [args for _, args, _, _ in calls])]
        except Exception:
            if conn.in_transaction:  # (a batch that opened one: cannot happen to a one-statement batch)
                conn.execute("ROLLBACK")
            calls = [(fn, args, one_write, None) for fn, args, one_write, _ in calls]
    outcomes: list[tuple[bool, Any]] = []
    conn.execute("BEGIN IMMEDIATE")
    try:
        i = 0
        while i < len(calls):
            batch = calls[i][3]
            end = i + 1
            while batch is not None and end < len(calls) and calls[end][3] is batch and end - i < BATCH_CALLS:
                end += 1
            outcomes += _batched(conn, batch, calls[i:end]) if batch is not None else [_one(conn, *calls[i][:3])]
            i = end
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return outcomes


def _batched(conn: sqlite3.Connection, batch: Batch, calls: list[Call]) -> list[tuple[bool, Any]]:
    """Consecutive calls of one `batch` in one statement; when it raises, it is undone and the
    calls run one by one, so a call that fails fails alone. Calls made `one_write` have a batch
    that writes with one statement too, which SQLite undoes alone when it fails: no savepoint
    (two statements less per commit, each a round of the GIL between this thread and the loop)."""
    one_write = all(call[2] for call in calls)
    if not one_write:
        conn.execute("SAVEPOINT grouped_batch")
    try:
        results = batch(conn, [args for _, args, _, _ in calls])
    except Exception:
        if not conn.in_transaction:  # SQLite ended the transaction (disk full, I/O error)
            raise
        if not one_write:
            conn.execute("ROLLBACK TO grouped_batch")
            conn.execute("RELEASE grouped_batch")
        return [_one(conn, fn, args, one_write) for fn, args, one_write, _ in calls]
    if not one_write:
        conn.execute("RELEASE grouped_batch")
    return [(True, result) for result in results]


def _one(conn: sqlite3.Connection, fn: Callable[..., Any], args: tuple[object, ...], one_write: bool
         ) -> tuple[bool, Any]:
    if one_write:  # its one statement is undone alone by SQLite when it fails
        try:
            return True, fn(conn, *args)
        except Exception as exc:
            if not conn.in_transaction:  # SQLite ended the transaction (disk full, I/O error)
                raise
            return False, exc
    conn.execute("SAVEPOINT grouped_call")
    try:
        outcome: tuple[bool, Any] = (True, fn(conn, *args))
    except Exception as exc:  # this call's writes only are undone; the others go on
        conn.execute("ROLLBACK TO grouped_call")
        outcome = (False, exc)
    conn.execute("RELEASE grouped_call")
    return outcome
