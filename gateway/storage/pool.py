"""The gateway's connections to PostgreSQL: one async pool, the schema migrated when it opens.

Connections are checked before each use, so after a restart of PostgreSQL the first statement
gets a fresh connection instead of the dead one; while the server is unreachable, taking a
connection fails after `storage.connect_timeout_s` (the caller then refuses to ack).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import psycopg
from psycopg_pool import AsyncConnectionPool

from gateway.config.storage import StorageConfig
from gateway.storage.schema import migrate


def _connect_timeout(storage: StorageConfig) -> int:
    return max(1, round(storage.connect_timeout_s))  # libpq takes whole seconds


def migrate_dsn(dsn: str, storage: StorageConfig, progress: Callable[[str], None] = lambda line: None) -> int:
    """Connect once and migrate (blocking: run it off the event loop or before it starts)."""
    with psycopg.connect(dsn, connect_timeout=_connect_timeout(storage)) as conn:
        return migrate(conn, progress)


def new_pool(dsn: str, storage: StorageConfig) -> AsyncConnectionPool:
    """A closed pool of at most `storage.pool_size` connections (no I/O: open it on the event loop)."""
    return AsyncConnectionPool(
        dsn, min_size=1, max_size=storage.pool_size, open=False, timeout=storage.connect_timeout_s,
        kwargs={"connect_timeout": _connect_timeout(storage), "autocommit": True},
        # reconnect_timeout 0: a failed connection attempt is not retried in the background with
        # a growing back-off; the next caller tries again, so the store works again as soon as
        # PostgreSQL is back (measured: the first reading stored ~1 s after a restart)
        check=AsyncConnectionPool.check_connection, reconnect_timeout=0, name="gateway")


async def open_pool(dsn: str, storage: StorageConfig,
                    progress: Callable[[str], None] = lambda line: None) -> AsyncConnectionPool:
    """An open pool of at most `storage.pool_size` connections; the schema is migrated first."""
    await asyncio.to_thread(migrate_dsn, dsn, storage, progress)
    pool = new_pool(dsn, storage)
    await pool.open(wait=True, timeout=storage.connect_timeout_s)
    return pool
