"""Where ReadingService stores a reading: the interface both stores implement.

`SqliteReadingStore` (gateway/devices/readings.py) is the embedded default; `PostgresReadingStore`
(gateway/storage/readings.py) is the shared store of several gateways. Either way `insert` returns
only after the row is committed, and one device + seq is one row, whichever gateway stored it.
`insert_then` is the same with a callback instead of an awaitable (SQLite calls it in the loop pass
that reads the commit's result; by default it is the awaitable's done-callback).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Protocol

from firmware_protocol import SensorReading


_values_json = json.JSONEncoder(ensure_ascii=False).encode  # made once, not per reading


def row_fields(msg: SensorReading, received_at: float) -> tuple[float, str, str]:
    """What both stores write of a reading besides its ids: (measured_at, clock, values as JSON).
    `clock` says whose clock `measured_at` is: the device's, or the gateway's at receipt."""
    measured_at, clock = (float(msg.measured_at), "device") if msg.measured_at else (received_at, "gateway")
    return measured_at, clock, _values_json([[name, unit, value] for name, unit, value in msg.values])


class StorageFailed(Exception):
    """The reading could not be stored (database error or unreachable): nothing was committed."""


class ReadingStore(Protocol):
    async def start(self) -> None:
        """Called when the gateway starts serving (SQLite: its writer process); by default nothing."""
        return None

    async def close(self) -> None:
        """Called when the gateway stops serving; `start` may follow again. By default nothing."""
        return None

    def insert(self, device_id: str, msg: SensorReading, received_at: float) -> Awaitable[tuple[int, bool]]:
        """(row id, True) once committed; (its id, False) for a known device + seq; (0, False)
        for a seq the retention already pruned. StorageFailed when nothing could be committed.
        A coroutine (PostgreSQL) or a future (SQLite: no task per reading)."""
        ...

    def insert_then(self, device_id: str, msg: SensorReading, received_at: float,
                    then: Callable[[tuple[int, bool] | None, BaseException | None], None]) -> None:
        """`insert`, then `then((row id, new), None)` or `then(None, exception)` (StorageFailed,
        or CancelledError when the insert was cancelled)."""
        stored = asyncio.ensure_future(self.insert(device_id, msg, received_at))
        stored.add_done_callback(partial(_settled, then))


def _settled(then: Callable[[tuple[int, bool] | None, BaseException | None], None],
             stored: asyncio.Future[tuple[int, bool]]) -> None:
    if stored.cancelled():
        then(None, asyncio.CancelledError())
    elif (exc := stored.exception()) is not None:
        then(None, exc)
    else:
        then(stored.result(), None)
