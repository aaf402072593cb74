"""The readings feed: stored readings become memories from a cursor kept with them, woken by the
bus, caught up after a restart, in batches, every reading evaluated by the threshold rules."""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import apsw
import psycopg
import pytest

from gateway.bus import EventBus
from gateway.devices.readings import ReadingStored
from gateway.memory.events import Alert
from gateway.memory.reading_feed import ReadingFeed
from gateway.memory.rules import RuleEngine
from gateway.memory.schema import MIGRATIONS, load_vec
from gateway.memory.service import MemoryService

TZ = ZoneInfo("Europe/Berlin")
DAY = datetime(2026, 11, 30, 7, 15, tzinfo=TZ)


def bp(reading_id: int, systolic: float, device: str = "bp-anna", diastolic: float = 80.0) -> ReadingStored:
    return ReadingStored(reading_id, device, "blood_pressure", {"systolic": systolic, "diastolic": diastolic},
                         {"systolic": "mmHg", "diastolic": "mmHg"}, DAY + timedelta(minutes=reading_id), DAY)


class Table:
    """The readings table as the feed sees it (gateway/devices/reading_log.py)."""

    def __init__(self, bus: EventBus | None = None) -> None:
        self.rows: list[ReadingStored] = []
        self.bus = bus
        self.fail_next = 0

    def store(self, *events: ReadingStored) -> None:
        self.rows += events
        for event in events:
            if self.bus is not None:
                self.bus.publish(event)

    async def after(self, reading_id: int, limit: int) -> list[ReadingStored]:
        if self.fail_next:
            self.fail_next -= 1
            raise OSError("disk I/O error")
        return [r for r in self.rows if r.reading_id > reading_id][:limit]

    async def last_id(self) -> int:
        return max((r.reading_id for r in self.rows), default=0)


def feed_of(memory: MemoryService, table: Table, alerts: list[Alert] | None = None, **kw) -> ReadingFeed:
    rules = RuleEngine(memory, (alerts if alerts is not None else []).append, lambda user: ("box-anna",))
    return ReadingFeed(memory, table, rules, **kw)


async def readings_of(memory: MemoryService, user: str = "anna") -> list:
    return await memory.recent(user, 1000, all_of=["kind:event"], any_of=["reading:*"])


async def test_a_stored_reading_becomes_an_observation_of_the_devices_user_when_the_bus_wakes_the_feed(
        memory: MemoryService) -> None:
    bus = EventBus()
    table = Table(bus)
    remembered = []
    feed = feed_of(memory, table, on_remembered=remembered.append)
    task = asyncio.create_task(feed.run(bus.notify(ReadingStored)))
    await asyncio.wait_for(feed.caught_up.wait(), 10)
    table.store(ReadingStored(7, "bp-anna", "blood_pressure", {"systolic": 141, "diastolic": 91},
                              {"systolic": "mmHg", "diastolic": "mmHg"}, DAY, DAY))
    async with asyncio.timeout(10):
        while not remembered:
            feed.caught_up.clear()
            await feed.caught_up.wait()
    task.cancel()
    [node] = await readings_of(memory)
    assert remembered == [node]
    assert node.content == f"blood pressure 141 over 91 mmHg, measured {DAY.astimezone():%Y-%m-%d %H:%M} by bp-anna"
    assert set(node.tags) == {"kind:event", "domain:homecare", "source:bp-anna", "reading:blood_pressure",
                              "date:2026-11-30"}
    assert node.importance >= 7  # above 140/90 raises the importance
    assert await memory.cursor("readings") == 7


async def test_readings_stored_while_no_feed_ran_are_caught_up_once_in_batches_and_never_twice(
        memory: MemoryService, caplog) -> None:
    table = Table()
    table.store(*(bp(i, 120 + i % 10) for i in range(1, 601)))
    feed = feed_of(memory, table, batch=256)
    with caplog.at_level(logging.INFO):
        assert [await feed.feed_once() for _ in range(4)] == [256, 256, 88, 0]
    assert "memory: catching up 600 readings after #0" in caplog.text
    assert len(await readings_of(memory)) == 600
    table.store(*(bp(i, 120) for i in range(601, 611)))
    again = feed_of(memory, table)  # the next gateway: its feed starts at the stored cursor
    assert [await again.feed_once() for _ in range(2)] == [10, 0]
    contents = [n.content for n in await readings_of(memory)]
    assert len(contents) == 610 and len(set(contents)) == 610


async def test_every_reading_over_a_threshold_fires_its_alert_also_in_a_flood_and_in_catch_up(
        memory: MemoryService) -> None:
    rule = await memory.remember("anna", "Blood pressure above 140/90: please rest.", kind="rule", persistent=True,
                                 extra_tags=["reading:blood_pressure", "above:140/90"])
    table = Table()
    table.store(*(bp(i, 150 if i % 7 == 0 else 120) for i in range(1, 1001)))
    table.store(bp(1001, 150, device="box-ben"))  # ben's reading: anna's rule does not apply
    alerts: list[Alert] = []
    feed = feed_of(memory, table, alerts)
    while await feed.feed_once():
        pass
    assert len(alerts) == 1000 // 7 == feed.alerts
    assert {(a.user_id, a.rule_id, a.severity, a.devices) for a in alerts} == {("anna", rule.id, "warning", ("box-anna",))}
    assert alerts[0].text == "Blood pressure above 140/90: please rest. The reading: blood pressure 150 over 80 mmHg."
    kept = await memory.recent("anna", 1000, all_of=[f"alert:{rule.id}"])
    assert len(kept) == len(alerts)  # each alert is kept as an observation, written with its reading


async def test_a_reading_that_cannot_be_a_memory_is_logged_and_skipped_and_the_next_ones_are_remembered(
        memory: MemoryService, caplog) -> None:
    table = Table()
    table.store(bp(1, 120), ReadingStored(2, "bp-anna", "x" * 200, {"value": 1.0}, {}, DAY, DAY), bp(3, 121))
    feed = feed_of(memory, table)
    assert await feed.feed_once() == 3
    assert "memory: reading #2 (" in caplog.text and "memory-bad-input" in caplog.text
    assert (feed.remembered, feed.skipped, await memory.cursor("readings")) == (2, 1, 3)


async def test_a_failing_read_is_logged_and_retried_from_the_same_cursor(memory: MemoryService, caplog) -> None:
    table = Table()
    table.store(bp(1, 120), bp(2, 121))
    table.fail_next = 2
    pauses: list[float] = []
    feed = feed_of(memory, table, sleep=lambda s: pauses.append(s) or asyncio.sleep(0))
    task = asyncio.create_task(feed.run(EventBus().notify(ReadingStored)))
    await asyncio.wait_for(feed.caught_up.wait(), 10)
    task.cancel()
    assert len(await readings_of(memory)) == 2 and pauses == [1.0, 2.0]
    assert caplog.text.count("memory: readings after #0 not remembered; retrying") == 2


async def test_the_cursor_commits_with_the_memories_a_failed_write_leaves_both_unchanged(memory: MemoryService) -> None:
    table = Table()
    table.store(bp(1, 120), bp(2, 121))
    feed = feed_of(memory, table)
    await feed.feed_once()
    table.store(bp(3, 122), bp(4, 123))
    with pytest.raises((apsw.Error, psycopg.Error)):  # the second node of the batch breaks the transaction
        await memory.remember_many([*(await _specs(memory, table.rows[2:])), _broken(memory)], ("readings", 4))
    assert (await memory.cursor("readings"), len(await readings_of(memory))) == (2, 2)
    assert await feed.feed_once() == 2
    assert (await memory.cursor("readings"), len(await readings_of(memory))) == (4, 4)


async def _specs(memory: MemoryService, events: list[ReadingStored]) -> list:
    from gateway.memory.readings import reading_spec

    return [reading_spec(memory.user_for, e, memory.clock()) for e in events]


def _broken(memory: MemoryService):
    from dataclasses import replace

    from gateway.memory.node_input import node_input

    return replace(node_input("anna", "x", now=0), type="not-a-type")  # refused by the table's CHECK


async def test_a_memory_that_predates_the_feed_starts_after_the_readings_already_stored(
        tmp_path: Path, embedder, caplog) -> None:
    path = tmp_path / "old.db"
    conn = apsw.Connection(str(path))  # a memory of the previous schema, with memories in it
    load_vec(conn)
    conn.execute(MIGRATIONS[0])
    conn.execute("PRAGMA user_version = 1")
    conn.execute("INSERT INTO nodes(user_id, type, content, importance, ts, created, last_retrieved, embedding) "
                 "VALUES ('anna', 'observation', 'old', 3, 0, 0, 0, zeroblob(1536))")
    conn.close()
    table = Table()
    table.store(bp(1, 120), bp(2, 121))  # remembered by the bus consumer of the previous version
    async with MemoryService(path, lambda: embedder, users={"bp-anna": "anna"}) as memory:
        feed = feed_of(memory, table)
        with caplog.at_level(logging.INFO):
            assert await feed.feed_once() == 0
        assert "readings feed starts after reading #2 (this memory predates the feed)" in caplog.text
        table.store(bp(3, 122))
        assert await feed.feed_once() == 1
        assert [n.content[:28] for n in await readings_of(memory)] == ["blood pressure 122 over 80 m"]


async def test_readings_of_one_kind_and_device_share_one_embedding_and_are_found_by_meaning(
        memory: MemoryService) -> None:
    table = Table()
    table.store(*(bp(i, 120 + i) for i in range(1, 41)),
                ReadingStored(41, "bp-anna", "temperature", {"celsius": 21.5}, {"celsius": "°C"}, DAY, DAY))
    feed = feed_of(memory, table)
    embedded = []
    inner = memory.embed

    async def counting(texts):
        embedded.append(list(texts))
        return await inner(texts)

    memory.embed = counting
    await feed.feed_once()
    assert embedded == [["blood pressure over mmHg, from bp-anna", "celsius °C, from bp-anna"]]
    [best, *_] = await memory.search("anna", "room temperature", 3)
    assert best.node.content.startswith("celsius 21.5 °C")
    [best, *_] = await memory.search("anna", "my blood pressure", 3)
    assert best.node.content.startswith("blood pressure")
