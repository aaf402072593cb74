"""`gateway storage migrate --from sqlite --to postgres`: an existing box's data into PostgreSQL.

Copies, from the devices database (`devices.database`): devices and their tokens, readings (ids
kept, so the memory's feed cursor stays valid), the retention's pruned seqs, the console's device
-> person mapping and the activation codes boxes wait with; from the memory
database (`memory.path`): nodes with their tags and embeddings (float32 -> halfvec), profiles,
meta (the embedding model's name) and the feed cursors. Conversation history lives in the
gateway's RAM only (gateway/brain/history.py): there is none to move.

Idempotent: every row keeps its key and is inserted with ON CONFLICT DO NOTHING, one transaction
per table, so a second run (or a run after an interrupted one) copies what is missing and
changes nothing else. The id sequences are moved past the copied ids. At the end each table is
verified on both sides: every source key must be in PostgreSQL, and a checksum over the copied
columns (sha256 over the rows in key order, each row's values in a canonical form: integral
floats as ints, the embedding as the float16s PostgreSQL keeps) of the SQLite rows must equal
the one of the PostgreSQL rows with those keys, read back; a difference raises CopyMismatch
naming the table, both checksums, how many rows differ and the first one's key and columns.
Rows PostgreSQL holds beyond the SQLite keys (another box's) are not compared. Reads the SQLite
files read-only (stop the gateway first so nothing is written meanwhile).
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import psycopg

from gateway.storage.memory_store import vector_literal
from gateway.storage.schema import migrate

BATCH = 2000


@dataclass(frozen=True)
class Table:
    name: str
    columns: tuple[str, ...]
    key: tuple[str, ...]
    source: str  # "devices" or "memory"
    identity: bool = False  # an id column whose sequence must follow
    added: tuple[tuple[str, str], ...] = ()  # (column, SQL value) read where an older database lacks it


TABLES = (
    Table("devices", ("device_id", "token_hash", "name", "created_at", "last_seen", "broker_hash", "client_hash",
                      "open_enrolled"), ("device_id",), "devices",
          added=(("client_hash", "NULL"), ("open_enrolled", "0"))),  # a xiaozhi box's Client-Id binding
    Table("readings", ("id", "device_id", "seq", "kind", "measured_at", "received_at", "clock", '"values"'), ("id",),
          "devices", identity=True),
    Table("readings_pruned", ("device_id", "max_seq", "pruned", "last_pruned_at"), ("device_id",), "devices"),
    Table("device_people", ("device_id", "person", "updated_at"), ("device_id",), "devices"),
    Table("activations", ("device_id", "code", "challenge", "details", "created_at", "expires_at", "approved_at",
                          "client_hash"), ("device_id",), "devices", added=(("client_hash", "NULL"),)),
    Table("nodes", ("id", "user_id", "type", "content", "importance", "ts", "created", "last_retrieved",
                    "pointer_ids", "tags", "embedding"), ("id",), "memory", identity=True),
    Table("node_tags", ("tag", "node_id"), ("tag", "node_id"), "memory"),
    Table("profiles", ("user_id", "portrait", "extra_info", "updated"), ("user_id",), "memory"),
    Table("meta", ("key", "value"), ("key",), "memory"),
    Table("feed_cursors", ("name", "position"), ("name",), "memory"),
)


class CopyMismatch(RuntimeError):
    """PostgreSQL's rows differ from (or lack some of) the SQLite rows after the copy."""


@dataclass
class Copied:
    table: str
    source_rows: int
    inserted: int
    target_rows: int


def _open_ro(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True)


def _has_table(conn: sqlite3.Connection, name: str) -> bool:
    return conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)).fetchone() is not None


def _select(conn: sqlite3.Connection, table: Table) -> str:
    """SELECT of the table's columns in key order; a column added after the database was last
    opened by the gateway is read as its value in `table.added` (NULL, 0)."""
    present = {row[1] for row in conn.execute(f"PRAGMA table_info({table.name})")}
    missing = dict(table.added)
    columns = [c if c.strip('"') in present or c not in missing else f"{missing[c]} AS {c}" for c in table.columns]
    return f"SELECT {', '.join(columns)} FROM {table.name} ORDER BY {', '.join(table.key)}"


def _rows(conn: sqlite3.Connection, table: Table) -> Iterator[list[tuple]]:
    cur = conn.execute(_select(conn, table))
    while rows := cur.fetchmany(BATCH):
        yield rows


def _convert(table: Table, row: tuple) -> tuple:
    if table.name == "nodes":  # the float32 blob -> pgvector's text form
        *head, blob = row
        return (*head, vector_literal(np.frombuffer(blob, np.float32)))
    return row


def copy_table(src: sqlite3.Connection, dst: psycopg.Connection, table: Table,
               progress: Callable[[str], None]) -> Copied:
    total = src.execute(f"SELECT count(*) FROM {table.name}").fetchone()[0]
    placeholders = ", ".join(["%s"] * len(table.columns))
    sql = (f"INSERT INTO {table.name} ({', '.join(table.columns)}) VALUES ({placeholders})"
           f" ON CONFLICT ({', '.join(table.key)}) DO NOTHING")
    inserted = done = 0
    with dst.transaction(), dst.cursor() as cur:
        if table.name == "feed_cursors":  # the box's own position replaces the new schema's start at 0
            sql = sql.replace("DO NOTHING", "DO UPDATE SET position = excluded.position"
                              " WHERE feed_cursors.position <> excluded.position")
        for rows in _rows(src, table):
            cur.executemany(sql, [_convert(table, r) for r in rows])
            inserted += cur.rowcount if cur.rowcount > 0 else 0
            done += len(rows)
            progress(f"storage: {table.name}: {done}/{total}")
        if table.identity:
            cur.execute(f"SELECT setval(pg_get_serial_sequence('{table.name}', 'id'),"
                        f" greatest((SELECT coalesce(max(id), 0) FROM {table.name}), 1))")
    target = dst.execute(f"SELECT count(*) FROM {table.name}").fetchone()[0]
    return Copied(table.name, total, inserted, target)


def _verify(src: sqlite3.Connection, dst: psycopg.Connection, table: Table) -> int:
    """How many source keys are missing in PostgreSQL (0 when the copy is complete)."""
    missing = 0
    names = [k.strip('"') for k in table.key]
    cur = src.execute(f"SELECT {', '.join(table.key)} FROM {table.name}")
    while rows := cur.fetchmany(BATCH):
        values = ", ".join("(" + ", ".join(["%s"] * len(names)) + ")" for _ in rows)
        on = " AND ".join(f"t.{k} = v.{k}" for k in names)
        found = dst.execute(f"SELECT count(*) FROM {table.name} t JOIN (VALUES {values}) AS v ({', '.join(names)})"
                            f" ON {on}", [x for r in rows for x in r]).fetchone()[0]
        missing += len(rows) - found
    return missing


def _canonical(value: object) -> object:
    """One form for a value on both sides (SQLite may keep an integral REAL as an int, and back)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _source_row(table: Table, row: tuple) -> tuple:
    if table.name == "nodes":  # PostgreSQL keeps the embedding as halfvec: compare the float16s
        *head, blob = row
        return (*map(_canonical, head), np.frombuffer(blob, np.float32).astype(">f2").tobytes())
    return tuple(map(_canonical, row))


def _target_row(table: Table, row: tuple) -> tuple:
    if table.name == "nodes":  # halfvec_send(): int16 dims, int16 unused, big-endian float16s
        *head, sent = row
        return (*map(_canonical, head), bytes(sent)[4:])
    return tuple(map(_canonical, row))


_INT_KEYS = {"id", "node_id"}  # the other key columns are text


def _checksum(src: sqlite3.Connection, dst: psycopg.Connection, table: Table) -> str:
    """The checksum of the copied columns; raises CopyMismatch unless every SQLite row equals PostgreSQL's.

    Both sides are read in key order (text keys in PostgreSQL's "C" collation: byte order, as
    SQLite's BINARY and Python's str compare), merged on the key, and hashed row by row."""
    names = [k.strip('"') for k in table.key]
    pg_columns = ", ".join("halfvec_send(embedding)" if c == "embedding" else c for c in table.columns)
    pg_order = ", ".join(k if k in _INT_KEYS else f'{k} COLLATE "C"' for k in names)
    position = [table.columns.index(k) for k in table.key]
    ours, theirs = hashlib.sha256(), hashlib.sha256()
    differing, first = 0, ""
    source = src.execute(_select(src, table))
    with dst.transaction(), dst.cursor(name=f"checksum_{table.name}") as target:
        target.itersize = BATCH
        target.execute(f"SELECT {pg_columns} FROM {table.name} ORDER BY {pg_order}")
        other: tuple | None = None  # the next PostgreSQL row (merge join on the key)
        exhausted = False
        while rows := source.fetchmany(BATCH):
            for raw in rows:
                row = _source_row(table, raw)
                key = tuple(row[i] for i in position)
                while not exhausted and (other is None or tuple(other[i] for i in position) < key):
                    fetched = target.fetchone()
                    exhausted = fetched is None
                    other = None if fetched is None else _target_row(table, fetched)
                match = other if other is not None and tuple(other[i] for i in position) == key else None
                ours.update(repr(row).encode())
                theirs.update(repr(match).encode())
                if match != row:
                    differing += 1
                    if differing == 1:
                        what = ("the row is missing" if match is None else "differs in " + ", ".join(
                            c.strip('"') for c, a, b in zip(table.columns, row, match) if a != b))
                        first = f"{', '.join(f'{n}={k!r}' for n, k in zip(names, key))} ({what})"
    if differing:
        raise CopyMismatch(f"storage: {table.name}: checksum mismatch after the copy: SQLite sha256"
                           f" {ours.hexdigest()[:16]}, PostgreSQL {theirs.hexdigest()[:16]}; {differing} rows differ,"
                           f" the first {first}: PostgreSQL's rows changed since an earlier copy or were corrupted"
                           " on the way; check the database before using it")
    return ours.hexdigest()


def migrate_sqlite_to_postgres(devices_db: Path, memory_db: Path | None, dsn: str,
                               progress: Callable[[str], None] = print) -> list[Copied]:
    """Copy everything (see the module's doc); raises CopyMismatch when a source row is missing or differs after."""
    sources = {"devices": _open_ro(devices_db) if devices_db.exists() else None,
               "memory": _open_ro(memory_db) if memory_db is not None and memory_db.exists() else None}
    for name, conn in sources.items():
        if conn is None:
            progress(f"storage: no {name} database to copy ({devices_db if name == 'devices' else memory_db})")
    report = []
    try:
        with psycopg.connect(dsn, autocommit=True) as dst:
            migrate(dst, progress)
            for table in TABLES:
                src = sources[table.source]
                if src is None or not _has_table(src, table.name):
                    continue
                copied = copy_table(src, dst, table, progress)
                missing = _verify(src, dst, table)
                if missing:
                    raise CopyMismatch(f"storage: {table.name}: {missing} rows of the SQLite database are not in "
                                       "PostgreSQL after the copy")
                digest = _checksum(src, dst, table)
                progress(f"storage: {table.name}: {copied.source_rows} rows in SQLite, {copied.inserted} copied now, "
                         f"{copied.target_rows} in PostgreSQL")
                progress(f"storage: {table.name}: sha256 {digest[:16]} on both sides")
                report.append(copied)
    finally:
        for conn in sources.values():
            if conn is not None:
                conn.close()
    return report
