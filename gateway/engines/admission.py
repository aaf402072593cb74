"""Admission to an engine's workers: at most `workers` calls at once, the others wait in deadline order.

Pure asyncio (the threads are the runner's, gateway/engines/runner.py): a call takes a slot, runs,
gives the slot back; when every worker is busy it waits, and the earliest deadline goes first (a
reply's first sentence is due now, its later ones only when the audio ahead of them runs out, so
they never hold up another box's first audio). A call that would make more than `max_waiting`
wait is refused (`EngineBusy`), so the turns already admitted keep their latency when the machine
is full; each wait and each refusal is logged.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from gateway.errors import EngineBusy

log = logging.getLogger(__name__)


class Admission:
    def __init__(self, name: str, workers: int, max_waiting: int | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if workers < 1:
            raise ValueError(f"{name}: at least one worker, got {workers}")
        self.name = name
        self.workers = workers
        self.max_waiting = max_waiting  # None: no bound
        self._clock = clock
        self._free = workers
        self._waiting: list[tuple[float, int, asyncio.Future[None]]] = []
        self._order = itertools.count()
        self.waited = 0  # calls that had to wait (for benchmarks)
        self.refused = 0

    @property
    def busy(self) -> int:
        return self.workers - self._free

    @property
    def queued(self) -> int:
        return sum(1 for *_, f in self._waiting if not f.done())

    @asynccontextmanager
    async def slot(self, who: str = "", deadline: float | None = None) -> AsyncIterator[None]:
        """Hold one worker for the body. `deadline` (clock time the result is needed; None: now)
        orders the waiting line; raises EngineBusy when the line is full."""
        await self.acquire(who, deadline)
        try:
            yield
        finally:
            self.release()

    async def acquire(self, who: str = "", deadline: float | None = None) -> None:
        """Take a worker (wait for one by `deadline`); the caller must `release` it exactly once."""
        deadline = self._clock() if deadline is None else deadline
        if self._free and not self.queued:
            self._free -= 1
            return
        if self.max_waiting is not None and self.queued >= self.max_waiting:
            self.refused += 1
            log.warning("%s: all %d workers busy and %d calls waiting: %s refused", self.name, self.workers,
                        self.queued, who or "a call")
            raise EngineBusy(f"the gateway is busy ({self.name}: {self.queued} calls waiting); try again")
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiting, (deadline, next(self._order), future))
        self.waited += 1
        log.info("%s: all %d workers busy: %s waits (%d waiting)", self.name, self.workers, who or "a call",
                 self.queued)
        started = self._clock()
        try:
            await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():  # the slot was handed over as we were cancelled
                self.release()
            raise
        log.debug("%s: %s waited %.0f ms", self.name, who or "a call", (self._clock() - started) * 1000)

    def release(self) -> None:
        """Give a worker back: to the earliest deadline waiting, else to the free ones."""
        while self._waiting:
            *_, future = heapq.heappop(self._waiting)
            if not future.done():
                future.set_result(None)  # the slot passes straight to the earliest deadline
                return
        self._free += 1
