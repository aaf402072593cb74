"""The gateway's SQLite database (device registry + sensor readings): schema and its writer thread.

Every access from the asyncio side goes through `Database.run`, which executes on one dedicated
thread that owns the connection, so the event loop never blocks on the disk (the readings have a
writer of their own, below; SQLite serialises the two writers). Long reads that write nothing (the console's readings page: thousands of rows, every
few seconds) go through `Database.read` instead, on a thread and read-only connection of their
own, so they never hold up a reading's commit or a device's login on the writer thread. The CLI
uses `connect()` directly (it is not async).

WAL mode lets the CLI read while the gateway writes; `synchronous=FULL` makes a committed
transaction durable on disk before `run` returns, so an acknowledged reading survives a crash or
a power cut, not only a killed process.

The readings, many small writes that each must be durable before they are answered, are not
written here but by a process of their own (gateway/devices/reading_writer.py), on a connection
of its own to the same file: the readings that arrive while a batch is being committed share the
next commit, so a burst costs one fsync, not one each; the retention's prune goes through it too,
so the readings table has that one writer.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

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

    def close(self) -> None:
        self._reader.submit(self._close_reader).result()
        self._reader.shutdown(wait=True)
        self._executor.submit(self._conn.close).result()
        self._executor.shutdown(wait=True)

    def _close_reader(self) -> None:
        if self._read_conn is not None:
            self._read_conn.close()
            self._read_conn = None
