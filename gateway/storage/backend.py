"""The PostgreSQL backend `gateway run` serves with `storage.backend: postgres`: the device
registry, the readings store, the memory's node store and its readings feed (run by one member
of a cluster at a time, gateway/storage/feed_leader.py), all on one database.

Built without I/O (the composition root, gateway/app.py, builds it before the event loop runs);
`open` migrates the schema on a thread and opens the one async pool the registry, the readings
and the feed's source share. The memory's node store keeps its own synchronous connections (one
per service thread, gateway/storage/memory_store.py). When the database cannot be reached,
`open` raises a ConfigError of one line naming the DSN's environment variable and the reason.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import psycopg
from psycopg_pool import PoolTimeout

from gateway.config.sections import StorageConfig
from gateway.errors import ConfigError
from gateway.storage.devices import PostgresDeviceRegistry
from gateway.storage.feed_leader import FeedLeader
from gateway.storage.memory_store import PostgresMemoryStore
from gateway.storage.pool import migrate_dsn, new_pool
from gateway.storage.reading_log import PostgresReadingLog
from gateway.storage.readings import PostgresReadingStore


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


class PostgresBackend:
    def __init__(self, dsn: str, storage: StorageConfig) -> None:
        self._dsn, self._storage = dsn, storage
        self.pool = new_pool(dsn, storage)
        self.devices = PostgresDeviceRegistry(self.pool)
        self.readings = PostgresReadingStore(self.pool)
        self.reading_log = PostgresReadingLog(self.pool)
        self.feed_leader = FeedLeader(dsn, storage.connect_timeout_s)  # one feed per cluster

    def unreachable(self, exc: BaseException) -> ConfigError:
        return ConfigError(f"storage.backend is postgres but the database at ${self._storage.dsn_env} "
                           f"(storage.dsn_env) cannot be used: {_one_line(exc)}")

    async def open(self, progress: Callable[[str], None] = lambda line: None) -> None:
        """Migrate (on a thread) and open the pool; a ConfigError when the database is unreachable."""
        try:
            await asyncio.to_thread(migrate_dsn, self._dsn, self._storage, progress)
            await self.pool.open(wait=True, timeout=self._storage.connect_timeout_s)
        except (psycopg.Error, PoolTimeout) as exc:
            await self.pool.close()
            raise self.unreachable(exc) from exc

    async def close(self) -> None:
        await self.pool.close()

    def open_memory_store(self) -> PostgresMemoryStore:
        """The memory service's store (called on its writer and reader threads)."""
        try:
            return PostgresMemoryStore(self._dsn, self._storage.connect_timeout_s)
        except psycopg.Error as exc:
            raise self.unreachable(exc) from exc
