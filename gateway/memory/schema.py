"""Opening the memory database: apsw + sqlite-vec, WAL, and versioned migrations.

The stdlib `sqlite3` on these machines is built without `enable_load_extension`, so it cannot
load sqlite-vec; apsw bundles its own SQLite and can. sqlite-utils only wraps stdlib
`sqlite3.Connection` objects, so migrations are plain versioned SQL scripts here, applied in
order inside one transaction each, with `PRAGMA user_version` as the version counter.
"""

from __future__ import annotations

from pathlib import Path

import apsw
import sqlite_vec

from gateway.memory.errors import MemoryUnavailable

DIMS = 384

MIGRATIONS: tuple[str, ...] = (
    # 1: the memory stream, its tags, the binary-quantised vector index, profiles, meta
    f"""
    CREATE TABLE nodes(
        id INTEGER PRIMARY KEY,
        user_id TEXT NOT NULL,
        type TEXT NOT NULL CHECK (type IN ('observation', 'conversation', 'reflection')),
        content TEXT NOT NULL CHECK (length(content) > 0),
        importance INTEGER NOT NULL CHECK (importance BETWEEN 0 AND 10),
        ts REAL NOT NULL,              -- when it happened (unix seconds)
        created REAL NOT NULL,         -- when it was written
        last_retrieved REAL NOT NULL,
        pointer_ids TEXT NOT NULL DEFAULT '[]',
        tags TEXT NOT NULL DEFAULT '[]',
        embedding BLOB NOT NULL        -- float32[{DIMS}], unit length
    );
    CREATE INDEX nodes_user_ts ON nodes(user_id, ts);
    CREATE TABLE node_tags(
        tag TEXT NOT NULL,
        node_id INTEGER NOT NULL REFERENCES nodes(id) ON DELETE CASCADE,
        PRIMARY KEY (tag, node_id)
    ) WITHOUT ROWID;
    CREATE VIRTUAL TABLE node_vec USING vec0(user_id TEXT PARTITION KEY, embedding BIT[{DIMS}]);
    CREATE TABLE profiles(
        user_id TEXT PRIMARY KEY,
        portrait TEXT NOT NULL DEFAULT '',
        extra_info TEXT NOT NULL DEFAULT '',
        updated REAL
    );
    CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
    """,
    # 2: feed cursors, e.g. 'readings': the last devices-database reading turned into memories,
    # committed with those memories (gateway/memory/reading_feed.py). A new memory starts before
    # the first reading; one that already holds memories (readings came from the bus then) gets
    # no row here, and its feed starts at the end of the readings table.
    """
    CREATE TABLE feed_cursors(name TEXT PRIMARY KEY, position INTEGER NOT NULL);
    INSERT INTO feed_cursors(name, position) SELECT 'readings', 0 WHERE NOT EXISTS (SELECT 1 FROM nodes);
    """,
)


def load_vec(conn: apsw.Connection) -> str:
    """Load sqlite-vec into `conn`; returns its version. MemoryUnavailable with the fix if not."""
    try:
        conn.enable_load_extension(True)
        conn.load_extension(sqlite_vec.loadable_path())
        conn.enable_load_extension(False)
        return conn.execute("SELECT vec_version()").fetchone()[0]
    except apsw.Error as exc:
        raise MemoryUnavailable(
            f"cannot load sqlite-vec into SQLite through apsw: {exc}. Reinstall the packages: "
            "pip install --force-reinstall 'apsw>=3.45' 'sqlite-vec==0.1.*'") from None


def open_db(path: Path | str) -> apsw.Connection:
    """Open (creating it if needed) and migrate the memory database; WAL, foreign keys on."""
    if str(path) != ":memory:":
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    try:
        conn = apsw.Connection(str(path))
    except apsw.Error as exc:
        raise MemoryUnavailable(f"cannot open the memory database {path}: {exc}") from None
    conn.setbusytimeout(5000)
    load_vec(conn)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: a commit survives a process crash
    conn.execute("PRAGMA foreign_keys=ON")
    migrate(conn)
    return conn


def schema_version(conn: apsw.Connection) -> int:
    return conn.execute("PRAGMA user_version").fetchone()[0]


def migrate(conn: apsw.Connection) -> int:
    """Apply the migrations this database has not seen; returns the new version."""
    version = schema_version(conn)
    if version > len(MIGRATIONS):
        raise MemoryUnavailable(f"the memory database is schema v{version}, newer than this gateway "
                                f"(v{len(MIGRATIONS)}): upgrade the gateway")
    for number in range(version, len(MIGRATIONS)):
        with conn:  # one transaction per migration: all of it or nothing
            conn.execute(MIGRATIONS[number])
            conn.execute(f"PRAGMA user_version = {number + 1}")
    return schema_version(conn)
