"""The once-per-cluster jobs on a real PostgreSQL (gateway/storage/cluster_job.py): two members,
one runs the job at a time; the other takes over when the holder is killed, when the holder's lock
connection dies, and when the holder is frozen (the server ends its idle session); the memory's
scheduler on two members does not repeat today's reflection or reminder after a takeover."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import psycopg
import pytest

from gateway.memory.events import Alert
from gateway.memory.rules import RuleEngine
from gateway.memory.scheduler import MemoryScheduler
from gateway.memory.service import MemoryService
from gateway.storage.cluster_job import MEMORY_SCHEDULE, ClusterJob
from gateway.storage.job_runs import PostgresRunLog
from gateway.storage.memory_store import PostgresMemoryStore
from gateway.storage.pool import open_pool
from gateway.storage.schema import migrate
from tests.conftest import ROOT
from tests.memory.conftest import FakeClock, embedder  # noqa: F401  (the real MiniLM fixture)
from tests.memory.test_rules_reflection import bp
from tests.storage.test_pg_retention import STORAGE

KEY = 0x7465_7374  # "test": a lock of the tests' own
RETRY_S = 0.3

# A member process: holds the lock KEY (ClusterJob) and, while it does, writes a beat every 50 ms.
MEMBER = """
import asyncio, sys
import psycopg
from gateway.storage.cluster_job import ClusterJob

dsn, me, key, retry = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])

async def beat():
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        while True:
            await conn.execute("INSERT INTO beats (member) VALUES (%s)", (me,))
            await asyncio.sleep(0.05)

asyncio.run(ClusterJob(dsn, key, "beats", 3, retry_s=retry).run(beat))
"""


def beats(dsn: str) -> list[tuple[str, int]]:
    with psycopg.connect(dsn) as conn:
        return conn.execute("SELECT member, n FROM beats ORDER BY n").fetchall()


def start_member(dsn: str, me: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", MEMBER, dsn, me, str(KEY), str(RETRY_S)], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


async def until(check, timeout: float = 30) -> None:
    async with asyncio.timeout(timeout):
        while not check():
            await asyncio.sleep(0.05)


@pytest.fixture
def beats_dsn(postgres_dsn: str) -> str:
    with psycopg.connect(postgres_dsn) as conn:
        conn.execute("CREATE TABLE beats (n bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, member text NOT NULL)")
    return postgres_dsn


def runs_of(rows: list[tuple[str, int]]) -> list[str]:
    """The members in the order they held the job: ['a', 'b'] means a, then b, never interleaved."""
    out: list[str] = []
    for member, _ in rows:
        if not out or out[-1] != member:
            out.append(member)
    return out


async def test_two_member_processes_run_the_job_one_at_a_time_and_the_other_takes_over_when_the_holder_is_killed(
        beats_dsn: str) -> None:
    a = start_member(beats_dsn, "a")
    b = None
    try:
        await until(lambda: beats(beats_dsn))
        b = start_member(beats_dsn, "b")
        await asyncio.sleep(10 * RETRY_S)  # b has asked for the lock ~10 times by now
        assert {m for m, _ in beats(beats_dsn)} == {"a"}
        a.send_signal(signal.SIGKILL)
        a.wait(10)
        await until(lambda: any(m == "b" for m, _ in beats(beats_dsn)))
        await asyncio.sleep(0.5)
        assert runs_of(beats(beats_dsn)) == ["a", "b"]  # b's first beat after a's last
    finally:
        for p in (a, b):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait(10)


async def test_a_frozen_holder_loses_the_lock_to_the_servers_idle_timeout_and_stops_its_job_when_it_wakes(
        beats_dsn: str) -> None:
    a = start_member(beats_dsn, "a")
    b = None
    try:
        await until(lambda: beats(beats_dsn))
        b = start_member(beats_dsn, "b")
        await asyncio.sleep(5 * RETRY_S)
        a.send_signal(signal.SIGSTOP)  # a hang: its sockets stay open, nothing closes them
        await until(lambda: any(m == "b" for m, _ in beats(beats_dsn)))  # idle_session_timeout 3 x retry_s
        a.send_signal(signal.SIGCONT)
        await asyncio.sleep(20 * RETRY_S)  # a's watch has seen its lock's connection gone by now
        rows = beats(beats_dsn)
        first_b = next(n for m, n in rows if m == "b")
        late = [n for m, n in rows if m == "a" and n > first_b]
        # a woke with its beat loop due: at most the beat it was about to write, then its job is stopped
        assert len(late) <= 1, rows
        last_n = rows[-1][1]
        await asyncio.sleep(10 * RETRY_S)
        assert all(m == "b" for m, n in beats(beats_dsn) if n > last_n)
        assert a.poll() is None  # a stands by, alive
    finally:
        for p in (a, b):
            if p is not None:
                if p.poll() is None:
                    p.send_signal(signal.SIGCONT)
                    p.kill()
                p.wait(10)


async def _holder_backend(dsn: str, key: int) -> int:
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        row = await (await conn.execute(
            "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted"
            " AND ((classid::bigint << 32) | objid::bigint) = %s", (key,))).fetchone()
        return row[0]


async def _terminate(dsn: str, pid: int) -> None:
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        await conn.execute("SELECT pg_terminate_backend(%s)", (pid,))


async def test_the_holder_stops_its_job_at_once_when_its_lock_connection_dies_and_the_other_takes_over(
        postgres_dsn: str) -> None:
    running: set[str] = set()
    both: list[set[str]] = []  # every moment a job step saw another member's job running

    def job(me: str):
        async def run() -> None:
            running.add(me)
            try:
                while True:
                    if len(running) > 1:
                        both.append(set(running))
                    await asyncio.sleep(0.01)
            finally:
                running.discard(me)
        return run

    a, b = (ClusterJob(postgres_dsn, KEY, "tests", 3, retry_s=RETRY_S) for _ in range(2))
    tasks = [asyncio.create_task(a.run(job("a")))]
    try:
        await until(lambda: a.leading)
        tasks.append(asyncio.create_task(b.run(job("b"))))
        await asyncio.sleep(5 * RETRY_S)
        assert (a.leading, b.leading, running) == (True, False, {"a"})
        await _terminate(postgres_dsn, await _holder_backend(postgres_dsn, KEY))
        await until(lambda: b.leading and running == {"b"})
        await asyncio.sleep(5 * RETRY_S)
        assert (a.leading, b.leading, running) == (False, True, {"b"})  # a stands by again
        assert both == [] and (a.taken, b.taken) == (1, 1)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


TZ = ZoneInfo("Europe/Berlin")
EVENING = datetime(2026, 11, 30, 23, 5, tzinfo=TZ)  # after the reflection (23:00) and the portrait (22:35)


async def test_the_memory_scheduler_runs_on_one_member_and_the_one_taking_over_does_not_repeat_today(
        postgres_dsn: str, embedder) -> None:  # noqa: F811
    with psycopg.connect(postgres_dsn) as conn:
        migrate(conn)
    clock = FakeClock(EVENING.timestamp())
    members = []
    for name in ("a", "b"):
        memory = await MemoryService(":postgres:", lambda: embedder, clock=clock, users={"bp-anna": "anna"},
                                     open_store=lambda: PostgresMemoryStore(postgres_dsn)).start()
        pool = await open_pool(postgres_dsn, STORAGE)
        runs = PostgresRunLog(pool)
        alerts: list[Alert] = []
        ticks = [0]

        async def sleep(seconds: float, ticks=ticks) -> None:  # the clock stands at 23:05: tick again soon
            ticks[0] += 1
            await asyncio.sleep(0.05)

        rules = RuleEngine(memory, alerts.append, lambda user: ("box-anna",), runs=runs)
        scheduler = MemoryScheduler(memory, rules, now=lambda: EVENING, sleep=sleep, runs=runs)
        members.append((name, memory, pool, alerts, ticks, scheduler,
                        ClusterJob(postgres_dsn, MEMORY_SCHEDULE, "runs the memory's jobs", 3, retry_s=RETRY_S)))
    (_, mem_a, _, alerts_a, ticks_a, sched_a, job_a), (_, mem_b, _, alerts_b, ticks_b, sched_b, job_b) = members
    await bp(mem_a, EVENING - timedelta(hours=2), 150, 95)  # something to reflect on
    await mem_a.remember("anna", "Weigh yourself", kind="rule", persistent=True,  # a deadline without its reading
                         extra_tags=["reading:weight", "schedule:before:09:00"])
    tasks = [asyncio.create_task(job_a.run(sched_a.run))]
    try:
        await until(lambda: job_a.leading and ticks_a[0] >= 1)
        tasks.append(asyncio.create_task(job_b.run(sched_b.run)))
        insights = await mem_b.reflections("anna", 10)
        assert insights and len(alerts_a) == 1 and alerts_a[0].severity == "reminder"
        assert (await mem_b.profile("anna"))["portrait"].startswith("Portrait of anna")
        await asyncio.sleep(5 * RETRY_S)
        assert ticks_b[0] == 0  # b stands by
        await _terminate(postgres_dsn, await _holder_backend(postgres_dsn, MEMORY_SCHEDULE))  # a's lock is gone
        await until(lambda: job_b.leading and ticks_b[0] >= 3)  # b's scheduler has ticked at 23:05 too
        assert [n.id for n in await mem_b.reflections("anna", 10)] == [n.id for n in insights]  # not again
        assert alerts_b == [] and len(alerts_a) == 1  # the reminder: once
        with psycopg.connect(postgres_dsn) as conn:
            assert sorted(j for (j,) in conn.execute("SELECT job FROM job_runs")) == [
                "portrait:anna", "reflection:anna", f"reminder:{(await mem_a.rules('anna'))[0].id}"]
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for _, memory, pool, *_ in members:
            await memory.close()
            await pool.close()
