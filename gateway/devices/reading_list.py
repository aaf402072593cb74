"""The stored readings as the console lists and charts them: the interface both stores implement
(SQLite: `SqliteReadingList` over the devices database, the functions `gateway readings` uses;
PostgreSQL, shared by several gateways: `PostgresReadingList` in gateway/storage/reading_list.py)."""

from __future__ import annotations

from typing import Protocol

from gateway.devices.database import Database
from gateway.devices.readings import StoredRow, list_readings, reading_kinds


class ReadingList(Protocol):
    async def recent(self, kind: str | None, limit: int, since: float, device_id: str | None = None) -> list[StoredRow]:
        """The newest `limit` readings (of `kind`, or every kind; of `device_id`, or every device) measured
        at or after `since`, newest first."""
        ...

    async def kinds(self) -> list[tuple[str, str]]:
        """Every (device id, kind) that has readings stored."""
        ...


class SqliteReadingList:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def recent(self, kind: str | None, limit: int, since: float, device_id: str | None = None) -> list[StoredRow]:
        return await self._db.read(list_readings, device_id, kind, limit, since)  # off the writer thread

    async def kinds(self) -> list[tuple[str, str]]:
        return await self._db.read(reading_kinds)
