"""A job that runs on one gateway of a cluster at a time: the holder of a PostgreSQL advisory lock.

Several gateways sharing one database must not each run the readings feed, the memory's daily
reflection or the readings retention. Each such job runs under a session advisory lock of its own
(`pg_try_advisory_lock(key)`), held on a connection of its own (not the pool's): the member that
takes it runs the job; the others try again every `retry_s`. The lock goes with its connection: a
member that dies (or loses the database) frees it, and the next member starts the job (each job
keeps its progress in the database: the feed's cursor, the days in `job_runs`, the readings'
ages). The holder watches its connection (its socket, and a `SELECT 1` every `retry_s`); when it
is gone the job is cancelled at once (another member may already hold the lock), and it asks
again only after `2 x retry_s`, so a standing-by member takes the job over. No election code of
our own.

A member that is frozen (SIGSTOP, a hung VM) or cut off keeps a TCP connection the server
cannot see is dead. So the lock's session asks the server to close it when it is idle for
longer than the holder's checks allow (`idle_session_timeout`, PostgreSQL 14+) and to probe the
socket (`tcp_keepalives_*`, `tcp_user_timeout`: a pulled cable): the lock is then free within
about `3 x retry_s`, and a holder that wakes finds its connection gone and stops its job.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable

import psycopg

log = logging.getLogger(__name__)

# pg_try_advisory_lock keys, one per job (ASCII, like the migrations' "gate"); the feed's is the
# one gateways before the generalisation used, so old and new members still exclude each other
FEED = 0x6665_6564  # "feed": the readings -> memory feed and its alert rules
MEMORY_SCHEDULE = 0x6d65_6d6f  # "memo": reflection, portrait, deadline reminders (gateway/memory/scheduler.py)
RETENTION = 0x7072_756e  # "prun": the readings retention (gateway/storage/retention.py)
INSTALL_RULES = 0x7275_6c65  # "rule": memory.rules written once by members starting together (exclusively)


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


@contextlib.asynccontextmanager
async def exclusively(dsn: str, key: int, connect_timeout_s: float) -> AsyncIterator[None]:
    """The body runs while this member holds the lock `key` (waiting for it): a one-off step that
    members starting together must not do at once (the config's rules: check, then write)."""
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True,
                                                     connect_timeout=max(1, round(connect_timeout_s))) as conn:
        await conn.execute("SELECT pg_advisory_lock(%s)", (key,))
        yield  # the lock goes with the connection, closed here


class ClusterJob:
    """`run(job)` forever: wait for the lock `key`, run `job()` while it is held, start over when it is lost.

    `what` completes the log lines: "this gateway {what}", e.g. "feeds the readings into the memory".
    """

    def __init__(self, dsn: str, key: int, what: str, connect_timeout_s: float, retry_s: float = 5.0) -> None:
        self._dsn, self.key, self.what = dsn, key, what
        self._timeout, self.retry_s = max(1, round(connect_timeout_s)), retry_s
        self.leading = False
        self.taken = 0  # how often this member took the lock (tests, logs)

    async def _take(self) -> psycopg.AsyncConnection | None:
        idle_ms = int(3 * self.retry_s * 1000)
        try:
            conn = await psycopg.AsyncConnection.connect(
                self._dsn, autocommit=True, connect_timeout=self._timeout,
                keepalives=1, keepalives_idle=5, keepalives_interval=2, keepalives_count=3)
        except psycopg.Error as exc:
            log.warning("cluster job: PostgreSQL unreachable, so nobody here %s (%s); trying again",
                        self.what, _one_line(exc))
            return None
        settings = {"tcp_keepalives_idle": "5", "tcp_keepalives_interval": "2", "tcp_keepalives_count": "3"}
        if conn.info.server_version >= 140000:  # older servers lack these two; keepalives still apply
            settings |= {"idle_session_timeout": str(idle_ms), "tcp_user_timeout": str(idle_ms)}
        try:
            sets = "".join("set_config(%s, %s, false), " for _ in settings)  # one round trip
            params = [x for pair in settings.items() for x in pair] + [self.key]
            row = await (await conn.execute(f"SELECT {sets}pg_try_advisory_lock(%s)", params)).fetchone()
        except psycopg.Error as exc:
            log.warning("cluster job: could not ask for the lock of the one that %s (%s); trying again",
                        self.what, _one_line(exc))
            await conn.close()
            return None
        if row[-1]:
            return conn
        await conn.close()
        return None

    async def run(self, job: Callable[[], Awaitable[None]]) -> None:
        waiting_logged = False
        while True:
            conn = await self._take()
            if conn is None:
                if not waiting_logged:
                    log.info("cluster job: another gateway %s; this one stands by", self.what)
                    waiting_logged = True
                await asyncio.sleep(self.retry_s)
                continue
            log.info("cluster job: this gateway %s (lock %#x taken)", self.what, self.key)
            waiting_logged, self.leading = False, True
            self.taken += 1
            try:
                async with asyncio.TaskGroup() as tg:
                    running = tg.create_task(job(), name=f"cluster-job-{self.key:x}")
                    await self._watch(conn, running)
                    running.cancel()
            finally:
                self.leading = False
                await conn.close()
            # lost: ask again only after the others have asked (each every retry_s), so a member
            # whose connection just failed does not win its lock straight back
            await asyncio.sleep(2 * self.retry_s)

    async def _watch(self, conn: psycopg.AsyncConnection, running: asyncio.Task) -> None:
        """Returns when the lock's connection is gone (or the job ended by itself). Waiting on the
        connection's socket (`notifies`) sees a session the server ended at once; the `SELECT 1`
        every `retry_s` finds a connection that died silently (and keeps the session from idling out)."""
        while not running.done():
            try:
                async with asyncio.timeout(2 * self.retry_s):
                    async for _ in conn.notifies(timeout=self.retry_s):
                        pass
                    await conn.execute("SELECT 1")
            except (psycopg.Error, OSError, TimeoutError) as exc:
                log.warning("cluster job: stopped, this gateway no longer %s: its lock's connection is gone (%s)",
                            self.what, _one_line(exc))
                return
