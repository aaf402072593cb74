"""The readings feed: every stored reading becomes exactly one memory, and meets the alert rules.

The feed reads the durable readings table in id order (`ReadingSource`, gateway/devices/
reading_log.py) from its cursor: the id of the last reading turned into memory, stored in the
memory database in the same transaction as the memories it produced (`MemoryService.
remember_many`). So a crash or a `kill -9` at any moment neither loses a reading nor writes one
twice: after a restart the feed catches up from the cursor. The bus event `ReadingStored` only
wakes it (a `Notification`: a dropped or coalesced event loses nothing).

Per batch (up to `batch` readings): the observations are built (readings.py), the threshold
rules of each user are read once and evaluated on every reading (rules.py), the readings and the
alerts they fire are embedded in one call and written in one transaction with the cursor; then
each reading's node is handed to `on_remembered` and each alert is announced. A reading that
cannot become a memory is logged and skipped (the cursor passes it); a failing write is logged
and retried with a growing pause, from the same cursor.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from gateway.memory.errors import MemoryError_
from gateway.memory.readings import ReadingEvent, reading_spec
from gateway.memory.rules import RuleEngine
from gateway.memory.service import MemoryService
from gateway.memory.nodes import Node

log = logging.getLogger(__name__)

CURSOR = "readings"
BATCH = 256
RETRY_MAX_S = 30.0


class ReadingSource(Protocol):
    async def after(self, reading_id: int, limit: int) -> Sequence[ReadingEvent]: ...

    async def last_id(self) -> int: ...


class Wake(Protocol):
    async def wait(self) -> None: ...


class ReadingFeed:
    def __init__(self, memory: MemoryService, source: ReadingSource, rules: RuleEngine,
                 on_remembered: Callable[[Node], Any] = lambda node: None, batch: int = BATCH,
                 sleep: Callable[[float], Any] = asyncio.sleep) -> None:
        self.memory, self.source, self.rules = memory, source, rules
        self.on_remembered, self.batch, self._sleep = on_remembered, batch, sleep
        self.cursor: int | None = None
        self.remembered = 0  # readings turned into memories by this feed
        self.skipped = 0  # readings that could not become a memory (logged)
        self.alerts = 0
        self.caught_up = asyncio.Event()  # set whenever the feed has nothing left to read

    async def start_cursor(self) -> int:
        """The stored cursor; a memory from before the feed starts at the end of the readings (the
        bus had brought those); a cursor beyond the readings (the devices database was replaced)
        starts the feed from the first reading."""
        cursor, last = await self.memory.cursor(CURSOR), await self.source.last_id()
        if cursor is None:
            log.info("memory: readings feed starts after reading #%d (this memory predates the feed)", last)
            cursor = last
            await self.memory.set_cursor(CURSOR, cursor)
        elif cursor > last:
            log.warning("memory: the readings end at #%d but the memory has turned readings up to #%d into "
                        "memories: the devices database is not the one it fed from; feeding from its first reading",
                        last, cursor)
            cursor = 0
            await self.memory.set_cursor(CURSOR, cursor)
        elif cursor < last:
            log.info("memory: catching up %d readings after #%d", last - cursor, cursor)
        else:
            log.info("memory: readings feed at #%d, nothing to catch up", cursor)
        return cursor

    async def run(self, wake: Wake) -> None:
        """Forever: catch up from the cursor, then wait for the next wake-up."""
        self.cursor = await self.start_cursor()
        failures, started = 0, self.cursor
        while True:
            try:
                got = await self.feed_once()
                failures = 0
            except MemoryError_ as exc:
                got = -1
                failures += 1
                log.error("memory: readings after #%d not remembered (%s: %s); retrying", self.cursor, exc.code, exc.text)
            except Exception:  # the boundary of this task: the data stays in the readings table
                got = -1
                failures += 1
                log.exception("memory: readings after #%d not remembered; retrying", self.cursor)
            if got < 0:
                await self._sleep(min(RETRY_MAX_S, 0.5 * 2 ** min(failures, 6)))
            elif got == 0:
                if started is not None and self.cursor != started:
                    log.info("memory: caught up with the readings: %d remembered, now at #%d",
                             self.remembered, self.cursor)
                started = None
                self.caught_up.set()
                await wake.wait()
                self.caught_up.clear()

    async def feed_once(self) -> int:
        """One batch after the cursor: remembered, alerted, cursor moved. Returns how many readings
        it read (0: nothing new)."""
        cursor = self.cursor if self.cursor is not None else await self.start_cursor()
        events = list(await self.source.after(cursor, self.batch))
        if not events:
            self.cursor = cursor
            return 0
        specs = []
        for event in events:
            try:
                specs.append(reading_spec(self.memory.user_for, event, self.memory.clock()))
            except MemoryError_ as exc:
                self.skipped += 1
                log.warning("memory: reading #%d (%s from %s) not remembered: %s: %s",
                            event.reading_id, event.kind, event.device_id, exc.code, exc.text)
        pending = await self.rules.pending_alerts(specs)
        nodes = await self.memory.remember_many(specs + [p.node for p in pending], (CURSOR, events[-1].reading_id))
        self.cursor = events[-1].reading_id
        self.remembered += len(specs)
        log.debug("memory: readings #%d-#%d remembered (%d nodes)", events[0].reading_id, self.cursor, len(nodes))
        for node in nodes[:len(specs)]:
            if inspect.isawaitable(result := self.on_remembered(node)):
                await result
        for p in pending:
            self.rules.announce(p)
        self.alerts += len(pending)
        return len(events)
