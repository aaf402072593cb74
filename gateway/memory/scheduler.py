"""The memory's clock-driven jobs: daily reflection, daily portrait, deadline rules.

`tick(now)` runs whatever is due at `now` (each daily job once per day and user, after its HH:MM,
as the RunLog records: in RAM on one gateway, in PostgreSQL for a cluster, gateway/memory/
run_log.py) and is what tests drive. `run()` sleeps until the next due time, at most `max_sleep_s` (so a rule added
meanwhile is seen within that time), then ticks; clock and sleep are injected.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta

from gateway.memory.errors import MemoryError_
from gateway.memory.reflection import portrait, reflect
from gateway.memory.rules import RuleEngine
from gateway.memory.run_log import RunLog, RunLogInMemory
from gateway.memory.service import MemoryService

log = logging.getLogger(__name__)


def _hm(text: str) -> tuple[int, int]:
    h, m = text.split(":")
    return int(h), int(m)


def next_at(now: datetime, hm: tuple[int, int]) -> datetime:
    t = now.replace(hour=hm[0], minute=hm[1], second=0, microsecond=0)
    return t if t > now else t + timedelta(days=1)


class MemoryScheduler:
    def __init__(self, memory: MemoryService, rules: RuleEngine, *, reflection_time: str = "23:00",
                 portrait_time: str = "22:35", now: Callable[[], datetime] = lambda: datetime.now().astimezone(),
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep, max_sleep_s: float = 900,
                 runs: RunLog | None = None) -> None:
        self.memory = memory
        self.rules = rules
        self.reflection_at = _hm(reflection_time)
        self.portrait_at = _hm(portrait_time)
        self.now = now
        self.sleep = sleep
        self.max_sleep_s = max_sleep_s
        self._done: set[tuple[str, str]] = set()  # (job, day) handled by this scheduler
        self.runs = runs if runs is not None else RunLogInMemory()  # (job:user, day) run, maybe by another member

    def _due(self, job: str, hm: tuple[int, int], now: datetime) -> bool:
        day = now.date().isoformat()
        if (job, day) in self._done or (now.hour, now.minute) < hm:
            return False
        self._done.add((job, day))
        return True

    async def tick(self, now: datetime) -> list[str]:
        """Run what is due; returns what ran (for logs and tests). A failing job is logged; the
        others still run."""
        ran = []
        jobs = [("portrait", self.portrait_at, portrait), ("reflection", self.reflection_at, reflect)]
        for name, hm, job in jobs:
            if self._due(name, hm, now):
                for user in await self.memory.known_users():
                    if not await self.runs.first(f"{name}:{user}", now.date().isoformat()):
                        continue  # another member ran it today (it held the scheduler before)
                    try:
                        await job(self.memory, user, now)
                        ran.append(f"{name}:{user}")
                    except MemoryError_ as exc:
                        log.warning("memory %s for %s failed: %s: %s", name, user, exc.code, exc.text)
        for alert in await self.rules.check_deadlines(now):
            ran.append(f"reminder:{alert.user_id}:{alert.rule_id}")
        return ran

    async def next_wake(self, now: datetime) -> datetime:
        times = [next_at(now, self.reflection_at), next_at(now, self.portrait_at), now + timedelta(seconds=self.max_sleep_s)]
        for user in await self.memory.known_users():
            if (t := self.rules.next_deadline(now, await self.memory.active_rules(user))) is not None:
                times.append(t)
        return min(times)

    async def run(self) -> None:
        while True:
            now = self.now()
            ran = await self.tick(now)
            if ran:
                log.info("memory scheduler ran: %s", ", ".join(ran))
            wake = await self.next_wake(now)
            await self.sleep(max((wake - self.now()).total_seconds(), 0.0))
