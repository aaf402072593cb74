"""Every device's VAD windows decided together: one executor hop and one model run per window step.

Each listening box sends its microphone in chunks of ~20-60 ms all the time, silence included, and
each chunk needs the VAD's decision on its 1-2 windows. Decided one box at a time that is one
executor hop and one onnxruntime run per window per box, ~0.2-0.3 ms of CPU each on the 2-core VM
(more than the model's own arithmetic): with many boxes the largest cost of the gateway while
they are silent. Silero's model takes a batch of streams (each with its own state), so the
requests of all boxes waiting at one moment go to the VAD threads as one call
(`BatchVad.decide_many`), at about half the CPU per window from 4 boxes on.

When only one box was heard in the last second a request is decided at once (on the loop's next
turn, with whatever other requests came in the same turn): a single box waits for nothing. With
more, a request waits at most GATHER_MS for the others' (each box sends a chunk every ~40 ms).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from concurrent.futures import Future as ThreadFuture
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol, runtime_checkable

import numpy as np

from gateway.engines.base import VadEngine

GATHER_MS = 15  # the longest a box's VAD request waits for the other boxes' (several boxes heard)
RECENT_S = 1.0  # boxes heard within this long count as listening now


@runtime_checkable
class BatchVad(Protocol):
    """A VAD whose detectors (clones of one prototype) can be decided in one call."""

    def decide_many(self, requests: list[tuple[VadEngine, list[np.ndarray]]]) -> list[list[bool]]:
        """`is_speech` of each detector's windows in order; each detector at most once."""
        ...


_Request = tuple[VadEngine, list[np.ndarray], "asyncio.Future[list[bool]]"]


class VadBatcher:
    def __init__(self, engine: BatchVad, pool: ThreadPoolExecutor, clock: Callable[[], float] = time.monotonic,
                 gather_s: float = GATHER_MS / 1000) -> None:
        self._engine = engine
        self._pool = pool
        self._clock = clock
        self._gather_s = gather_s
        self._pending: list[_Request] = []
        self._flush: asyncio.Handle | None = None
        self._heard: dict[int, float] = {}  # id(detector) -> when it last asked

    async def decide(self, detector: VadEngine, windows: list[np.ndarray]) -> list[bool]:
        """The detector's decisions on `windows`, decided with the other boxes' waiting requests. A
        detector asks again only after its last request returned (its Listener awaits each feed),
        as with `is_speech`: one call at a time per detector."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[list[bool]] = loop.create_future()
        self._pending.append((detector, windows, future))
        now = self._clock()
        self._heard[id(detector)] = now
        if self._flush is None:
            several = sum(1 for t in self._heard.values() if now - t <= RECENT_S) > 1
            self._flush = (loop.call_later(self._gather_s, self._run) if several
                           else loop.call_soon(self._run))
        return await future

    def _run(self) -> None:
        self._flush = None
        batch, self._pending = self._pending, []
        now = self._clock()
        self._heard = {k: t for k, t in self._heard.items() if now - t <= RECENT_S}
        live = [(d, w, f) for d, w, f in batch if not f.cancelled()]
        if not live:
            return
        loop = asyncio.get_running_loop()
        requests = [(d, w) for d, w, _ in live]
        try:
            job = self._pool.submit(self._engine.decide_many, requests)
        except RuntimeError as exc:  # the pool is shut down (the runner is closing)
            for _, _, future in live:
                future.set_exception(exc)
            return

        def deliver(done: ThreadFuture[list[list[bool]]]) -> None:
            for _, _, future in live:
                if future.done():  # its caller stopped waiting
                    continue
                if (exc := done.exception()) is not None:
                    future.set_exception(exc)
            if done.exception() is None:
                for (_, _, future), decisions in zip(live, done.result()):
                    if not future.done():
                        future.set_result(decisions)

        def delivered(done: ThreadFuture[list[list[bool]]]) -> None:
            try:
                loop.call_soon_threadsafe(deliver, done)
            except RuntimeError:  # the loop is closed: nobody waits any more
                pass

        job.add_done_callback(delivered)

    def close(self) -> None:
        """Cancel a pending flush (the runner is closing)."""
        if self._flush is not None:
            self._flush.cancel()
            self._flush = None
        for _, _, future in self._pending:
            future.cancel()
        self._pending = []
