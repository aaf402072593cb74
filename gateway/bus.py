"""In-process event bus: producers publish frozen dataclass events, consumers subscribe by type.

Publishing never blocks: each subscriber has a bounded queue; when a slow subscriber's queue is
full, its oldest event is dropped and counted (`Subscription.dropped`), so one stuck consumer can
never stall a device link. Durable data (sensor readings, memories) is written to SQLite *before*
it is published; the bus only carries notifications. A consumer that reads the durable data
itself subscribes with `notify`: it only learns that something new was published (nothing to drop).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

log = logging.getLogger(__name__)


class Subscription:
    def __init__(self, bus: "EventBus", types: tuple[type, ...], maxsize: int, name: str) -> None:
        self._bus = bus
        self.types = types
        self.name = name
        self.queue: asyncio.Queue[Any] = asyncio.Queue(maxsize)
        self.dropped = 0

    def offer(self, event: Any) -> None:
        if self.queue.full():
            self.queue.get_nowait()
            self.dropped += 1
            log.warning("event bus: subscriber %s is slow; dropped an event (%d so far)", self.name, self.dropped)
        self.queue.put_nowait(event)

    async def get(self) -> Any:
        return await self.queue.get()

    def __aiter__(self) -> AsyncIterator[Any]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[Any]:
        while True:
            yield await self.queue.get()

    def close(self) -> None:
        self._bus._subs.discard(self)


class Notification(Subscription):
    """A wake-up: `wait()` returns once an event of the types was published since the last
    `wait()` returned (any number of events count as one); events themselves are not kept."""

    def __init__(self, bus: "EventBus", types: tuple[type, ...], name: str) -> None:
        super().__init__(bus, types, 1, name)
        self._event = asyncio.Event()

    def offer(self, event: Any) -> None:
        self._event.set()

    async def wait(self) -> None:
        await self._event.wait()
        self._event.clear()


class EventBus:
    def __init__(self) -> None:
        self._subs: set[Subscription] = set()

    def subscribe(self, *types: type, maxsize: int = 256, name: str = "subscriber") -> Subscription:
        """Receive events that are instances of any of `types` (all events when none given)."""
        sub = Subscription(self, types, maxsize, name)
        self._subs.add(sub)
        return sub

    def notify(self, *types: type, name: str = "notified") -> Notification:
        """Be woken when events of any of `types` are published (see `Notification`)."""
        sub = Notification(self, types, name)
        self._subs.add(sub)
        return sub

    def publish(self, event: Any) -> None:
        for sub in list(self._subs):
            if not sub.types or isinstance(event, sub.types):
                sub.offer(event)
