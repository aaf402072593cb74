"""A session's sensor readings in flight: stored side by side, acked in the order they came.

A device may send its next SensorReading before the last one's ack (a burst after being offline,
an MQTT device with a window). The session hands each reading to `ReadingAcks.submit` and goes on
reading its messages; the stores run concurrently (the SQLite store commits the readings that
arrive together in one statement, `SqliteReadingStore`), and each ack goes out once its row is
committed and every earlier reading of the session has been acked. At most `window` readings are
in flight per session: the next `submit` waits for the oldest, so a slow disk still pushes back on
the device instead of filling a queue.

One sender task per session sends the acks: it waits for the oldest reading's ack, then sends
every ack that is ready in order, in one go, so the acks of one commit leave in the same loop
pass (one MQTT write) instead of one pass each behind the one before.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable

from firmware_protocol import Message, ReadingAck

READINGS_IN_FLIGHT = 32  # per session


class ReadingAcks:
    def __init__(self, send: Callable[[Message], Awaitable[None]], window: int = READINGS_IN_FLIGHT) -> None:
        self._send = send
        self._window = window
        self._acks: deque[asyncio.Future[ReadingAck]] = deque()  # in the order the readings came
        self._ready = asyncio.Event()  # a reading is in flight: the sender has an ack to wait for
        self._room = asyncio.Event()  # an ack was sent: a reading more fits in the window
        self._failed: BaseException | None = None  # what sending an ack (or storing) raised
        self._sender: asyncio.Task[None] | None = None

    async def submit(self, start: Callable[[], Awaitable[ReadingAck]]) -> None:
        """Start storing one reading once the window has room (`start()`: a future or coroutine
        of its ack, e.g. `ReadingService.start`); raises what an earlier ack's sending raised
        (LinkClosed), so the session ends as it would have sending it itself."""
        while self._failed is None and len(self._acks) >= self._window:
            self._room.clear()
            await self._room.wait()
        if self._failed is not None:
            raise self._failed
        future = asyncio.ensure_future(start())  # a future as it is; a coroutine runs as a task
        self._acks.append(future)
        self._ready.set()
        if self._sender is None:
            self._sender = asyncio.create_task(self._send_acks(), name="reading-acks")

    async def _send_acks(self) -> None:
        try:
            while True:
                if not self._acks:
                    self._ready.clear()
                    await self._ready.wait()
                    continue
                await self._acks[0]  # the oldest ack: awake one pass after it is set (raises as storing did)
                while self._acks and self._acks[0].done():
                    await self._send(self._acks.popleft().result())  # raises what storing raised
                    self._room.set()
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # the session hears it at its next reading
            self._failed = exc
            self._room.set()

    async def close(self) -> None:
        """The session ends: acks not yet sent are dropped (their rows stay committed; the device
        resends those readings and gets DUPLICATE)."""
        pending = [*self._acks, *([self._sender] if self._sender is not None else [])]
        for future in pending:
            future.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        self._acks.clear()
        self._sender = None
