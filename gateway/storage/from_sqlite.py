"""`gateway storage migrate --from sqlite --to postgres`: an existing box's data into PostgreSQL.

Copies, from the devices database (`devices.database`): devices and their tokens, readings (ids
kept, so the memory's feed cursor stays valid), the retention's pruned seqs, the console's device
-> person mapping and the activation codes boxes wait with; from the memory
database (`memory.path`): nodes with their tags and embeddings (float32 -> halfvec), profiles,
meta (the embedding model's name) and the feed cursors. Conversation history lives in the
gateway's RAM only (gateway/brain/history.py): there is none to move.

Idempotent: every row keeps its key and is inserted with ON CONFLICT DO NOTHING, one transaction
per table, so a second run (or a run after an interrupted one) copies what is missing and
changes nothing else. The id sequences are moved past the copied ids. At the end each table's
rows are counted on both sides: every source key must be in PostgreSQL. Reads the SQLite files
read-only (stop the gateway first so nothing is written meanwhile).
"""

from __future__ import annotations

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


TABLES = (
    Table("devices", ("device_id", "token_hash", "name", "created_at", "last_seen", "broker_hash"), ("device_id",),
          "devices"),
    Table("readings", ("id", "device_id", "seq", "kind", "measured_at", "received_at", "clock", '"values"'), ("id",),
          "devices", identity=True),
    Table("readings_pruned", ("device_id", "max_seq", "pruned", "last_pruned_at"), ("device_id",), "devices"),
    Table("device_people", ("device_id", "person", "updated_at"), ("device_id",), "devices"),
    Table("activations", ("device_id", "code", "challenge", "details", "created_at", "expires_at", "approved_at"),
          ("device_id",), "devices"),
    Table("nodes", ("id", "user_id", "type", "content", "importance", "ts", "created", "last_retrieved",
                    "pointer_ids", "tags", "embedding"), ("id",), "memory", identity=True),
    Table("node_tags", ("tag", "node_id"), ("tag", "node_id"), "memory"),
    Table("profiles", ("user_id", "portrait", "extra_info", "updated"), ("user_id",), "memory"),
    Table("meta", ("key", "value"), ("key",), "memory"),
    Table("feed_cursors", ("name", "position"), ("name",), "memory"),
)


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


def _rows(conn: sqlite3.Connection, table: Table) -> Iterator[list[tuple]]:
    cur = conn.execute(f"SELECT {', '.join(table.columns)} FROM {table.name} ORDER BY {', '.join(table.key)}")
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


def migrate_sqlite_to_postgres(devices_db: Path, memory_db: Path | None, dsn: str,
                               progress: Callable[[str], None] = print) -> list[Copied]:
    """Copy everything (see the module's doc); raises RuntimeError when a source row is missing after."""
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
                    raise RuntimeError(f"storage: {table.name}: {missing} rows of the SQLite database are not in "
                                       "PostgreSQL after the copy")
                progress(f"storage: {table.name}: {copied.source_rows} rows in SQLite, {copied.inserted} copied now, "
                         f"{copied.target_rows} in PostgreSQL")
                report.append(copied)
    finally:
        for conn in sources.values():
            if conn is not None:
                conn.close()
    return report
