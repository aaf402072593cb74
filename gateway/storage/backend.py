"""The PostgreSQL backend `gateway run` serves with `storage.backend: postgres`: the device
registry, the readings store, the memory's node store, its readings feed, daily jobs and the
readings retention (each run by one member of a cluster at a time, gateway/storage/cluster_job.py), the LLM brain's conversation history,
the console's device -> person mapping and reading lists, the xiaozhi activation codes, all on
one database.

Built without I/O (the composition root, gateway/app.py, builds it before the event loop runs);
`open` migrates the schema on a thread and opens the one async pool the registry, the readings
and the feed's source share. The memory's node store keeps its own synchronous connections (one
per service thread, gateway/storage/memory_store.py). When the database cannot be reached,
`open` raises a ConfigError of one line naming the DSN's environment variable and the reason.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

import psycopg
from psycopg_pool import PoolTimeout

from gateway.config.storage import StorageConfig
from gateway.errors import ConfigError
from gateway.storage.devices import PostgresDeviceRegistry
from gateway.storage.job_runs import PostgresRunLog
from gateway.storage.activations import PostgresActivations
from gateway.storage.alert_relay import AlertRelay
from gateway.storage.cluster_job import FEED, INSTALL_RULES, MEMORY_SCHEDULE, RETENTION, ClusterJob, exclusively
from gateway.storage.history import PostgresHistoryStore
from gateway.storage.memory_store import PostgresMemoryStore
from gateway.storage.pool import migrate_dsn, new_pool
from gateway.storage.people import PostgresPeople
from gateway.storage.reading_list import PostgresReadingList
from gateway.storage.reading_log import PostgresReadingLog
from gateway.storage.readings import PostgresReadingStore
from gateway.storage.retention import PostgresPruner


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


class PostgresBackend:
    def __init__(self, dsn: str, storage: StorageConfig) -> None:
        self._dsn, self._storage = dsn, storage
        self.pool = new_pool(dsn, storage)
        self.devices = PostgresDeviceRegistry(self.pool)
        self.readings = PostgresReadingStore(self.pool)
        self.reading_log = PostgresReadingLog(self.pool)
        self.reading_list = PostgresReadingList(self.pool)  # the console's lists, charts and CSV
        self.history = PostgresHistoryStore(self.pool)  # the LLM brain's conversations per person
        self.people = PostgresPeople(self.pool)  # the console's device -> person
        # what runs on one member of a cluster at a time, each under its own advisory lock
        timeout = storage.connect_timeout_s
        self.feed_job = ClusterJob(dsn, FEED, "feeds the readings into the memory", timeout)
        self.schedule_job = ClusterJob(dsn, MEMORY_SCHEDULE, "runs the memory's reflection, portrait and reminders",
                                       timeout)
        self.retention_job = ClusterJob(dsn, RETENTION, "prunes old readings (devices.readings_retention_days)",
                                        timeout)
        self.run_log = PostgresRunLog(self.pool)  # the days the memory's daily jobs have run, cluster-wide
        self.alert_relay = AlertRelay(dsn, self.pool, timeout)  # alerts to every member's devices and screens

    def activations(self, ttl_s: float) -> PostgresActivations:
        """The xiaozhi activation codes (xiaozhi.activation_ttl_s)."""
        return PostgresActivations(self.pool, ttl_s)

    def installing_rules(self) -> contextlib.AbstractAsyncContextManager[None]:
        """Held while this member writes `memory.rules` (members starting together write them once)."""
        return exclusively(self._dsn, INSTALL_RULES, self._storage.connect_timeout_s)

    def pruner(self, feeds_memory: bool) -> PostgresPruner:
        """The readings retention's batches (`feeds_memory`: this gateway runs the memory)."""
        return PostgresPruner(self.pool, feeds_memory)

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
