"""Where ReadingService stores a reading: the interface both stores implement.

`SqliteReadingStore` (gateway/devices/readings.py) is the embedded default; `PostgresReadingStore`
(gateway/storage/readings.py) is the shared store of several gateways. Either way `insert` returns
only after the row is committed, and one device + seq is one row, whichever gateway stored it.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Protocol

from firmware_protocol import SensorReading


class StorageFailed(Exception):
    """The reading could not be stored (database error or unreachable): nothing was committed."""


class ReadingStore(Protocol):
    def insert(self, device_id: str, msg: SensorReading, received_at: float) -> Awaitable[tuple[int, bool]]:
        """(row id, True) once committed; (its id, False) for a known device + seq; (0, False)
        for a seq the retention already pruned. StorageFailed when nothing could be committed.
        A coroutine (PostgreSQL) or a future (SQLite: no task per reading)."""
        ...
