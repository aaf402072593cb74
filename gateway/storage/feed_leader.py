"""One readings feed per cluster: the member holding a PostgreSQL advisory lock feeds the memory.

Several gateways sharing one PostgreSQL memory would each turn every reading into a memory. The
feed therefore runs under a session advisory lock held on a connection of its own (not the
pool's): the member that takes it feeds; the others try again every `retry_s`. The lock goes with
its connection: a member that dies (or loses the database) frees it, and the next member starts
its feed from the cursor stored with the memories. The holder checks its connection every
`retry_s`; when it is gone the feed is stopped at once (another member may already hold the lock).
Readings stored by the other members publish no event on this gateway's bus, so the holder's
feed is also woken every `POLL_S` (`PollingWake`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Protocol

import psycopg

log = logging.getLogger(__name__)
KEY = 0x6665_6564  # pg_try_advisory_lock key of the readings feed ("feed")
POLL_S = 1.0  # the feed looks for the other members' readings at least this often


class Wake(Protocol):
    async def wait(self) -> None: ...


class PollingWake:
    """`wait()` returns on the bus's wake-up or after `poll_s`, whichever comes first."""

    def __init__(self, inner: Wake, poll_s: float = POLL_S) -> None:
        self._inner, self._poll_s = inner, poll_s

    async def wait(self) -> None:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self._poll_s):
                await self._inner.wait()


class FeedLeader:
    def __init__(self, dsn: str, connect_timeout_s: float, retry_s: float = 5.0) -> None:
        self._dsn, self._timeout, self.retry_s = dsn, max(1, round(connect_timeout_s)), retry_s
        self.leading = False

    async def _take(self) -> psycopg.AsyncConnection | None:
        try:
            conn = await psycopg.AsyncConnection.connect(self._dsn, autocommit=True, connect_timeout=self._timeout)
        except psycopg.Error as exc:
            log.warning("memory: readings feed: PostgreSQL unreachable (%s); trying again", " ".join(str(exc).split()))
            return None
        row = await (await conn.execute("SELECT pg_try_advisory_lock(%s)", (KEY,))).fetchone()
        if row[0]:
            return conn
        await conn.close()
        return None

    async def run(self, feed: Callable[[], Awaitable[None]]) -> None:
        """Forever: wait for the lock, run `feed` while it is held, start over when it is lost."""
        waiting_logged = False
        while True:
            conn = await self._take()
            if conn is None:
                if not waiting_logged:
                    log.info("memory: another gateway feeds the readings into the memory; this one stands by")
                    waiting_logged = True
                await asyncio.sleep(self.retry_s)
                continue
            log.info("memory: this gateway feeds the readings into the memory (feed lock taken)")
            waiting_logged, self.leading = False, True
            try:
                async with asyncio.TaskGroup() as tg:
                    feeding = tg.create_task(feed(), name="memory-readings")
                    await self._watch(conn)
                    feeding.cancel()
            finally:
                self.leading = False
                await conn.close()

    async def _watch(self, conn: psycopg.AsyncConnection) -> None:
        """Returns when the lock's connection is gone."""
        while True:
            await asyncio.sleep(self.retry_s)
            try:
                async with asyncio.timeout(self.retry_s):
                    await conn.execute("SELECT 1")
            except (psycopg.Error, TimeoutError) as exc:
                log.warning("memory: readings feed stopped: its lock's connection is gone (%s)",
                            " ".join(str(exc).split()) or type(exc).__name__)
                return
