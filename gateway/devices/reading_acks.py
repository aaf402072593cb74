"""A session's sensor readings in flight: stored side by side, acked in the order they came.

A device may send its next SensorReading before the last one's ack (a burst after being offline,
an MQTT device with a window). The session hands each reading to `ReadingAcks.submit` and goes on
reading its messages; the stores run concurrently (the SQLite store commits the readings that
arrive together in one transaction, `Database.run_grouped`), and each ack goes out once its row is
committed and every earlier reading of the session has been acked. At most `window` readings are
in flight per session: the next `submit` waits for the oldest, so a slow disk still pushes back on
the device instead of filling a queue.
"""

from __future__ import annotations

import asyncio
import inspect
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from firmware_protocol import Message, ReadingAck

READINGS_IN_FLIGHT = 32  # per session


class ReadingAcks:
    def __init__(self, send: Callable[[Message], Awaitable[None]], window: int = READINGS_IN_FLIGHT) -> None:
        self._send = send
        self._window = window
        self._acks: deque[tuple[asyncio.Task[None], Coroutine[Any, Any, ReadingAck]]] = deque()

    async def submit(self, store: Coroutine[Any, Any, ReadingAck]) -> None:
        """Start storing one reading (`store` returns its ack); raises what an earlier ack's
        sending raised (LinkClosed), so the session ends as it would have sending it itself."""
        try:
            self._reap()
            while len(self._acks) >= self._window:
                await asyncio.wait([self._acks[0][0]])
                self._reap()
        except BaseException:
            store.close()  # never started
            raise
        before = self._acks[-1][0] if self._acks else None
        self._acks.append((asyncio.create_task(self._store_then_ack(store, before), name="reading"), store))

    async def _store_then_ack(self, store: Coroutine[Any, Any, ReadingAck], before: asyncio.Task[None] | None) -> None:
        ack = await store
        if before is not None:
            await before  # the earlier reading's ack first; raises if sending it failed
        await self._send(ack)

    def _reap(self) -> None:
        while self._acks and self._acks[0][0].done():
            done, _ = self._acks.popleft()
            if not done.cancelled() and (exc := done.exception()) is not None:
                raise exc

    async def close(self) -> None:
        """The session ends: acks not yet sent are dropped (their rows stay committed; the device
        resends those readings and gets DUPLICATE)."""
        for task, _ in self._acks:
            task.cancel()
        await asyncio.gather(*(task for task, _ in self._acks), return_exceptions=True)
        for _, store in self._acks:
            if inspect.getcoroutinestate(store) == inspect.CORO_CREATED:  # cancelled before it began
                store.close()
        self._acks.clear()
