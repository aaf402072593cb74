"""Readings in flight side by side: shared commits (the writer process, reading_writer.py) and
in-order acks (gateway/devices/reading_acks.py), through the real embedded mosquitto and real SQLite."""

from __future__ import annotations

import asyncio
from functools import partial
from pathlib import Path

import pytest

from firmware_protocol import Hello, ReadingAck, ReadingStatus, SensorReading, Welcome
from gateway.app import Gateway
from gateway.config import parse_config
from gateway.devices.database import Database
from gateway.devices.reading_acks import READINGS_IN_FLIGHT, ReadingAcks
from gateway.bus import EventBus
from gateway.devices.reading_store import StorageFailed
from gateway.devices.readings import ReadingService, ReadingStored, SqliteReadingStore, list_readings
from gateway.links.base import LinkClosed
from gateway.links.mqtt import MqttLink
from gateway.links.mqtt_device import MqttDevice

ROOT = Path(__file__).resolve().parents[2]
HUMID = (("percent", "%", 45.0),)


async def test_a_failed_ack_ends_the_session_at_the_next_reading_and_later_acks_are_not_sent(tmp_path):
    sent: list[int] = []

    async def send(message: ReadingAck) -> None:
        if message.seq == 2:
            raise LinkClosed("gone")
        sent.append(message.seq)

    async def ack(seq: int) -> ReadingAck:
        await asyncio.sleep(0)
        return ReadingAck(seq, ReadingStatus.STORED)

    acks = ReadingAcks(send, window=4)
    for seq in (1, 2, 3):
        await acks.submit(partial(ack, seq))
    await asyncio.sleep(0.05)
    with pytest.raises(LinkClosed):
        await acks.submit(partial(ack, 4))
    await acks.close()
    await acks.close()
    assert sent == [1]


async def test_acks_of_readings_stored_out_of_order_go_in_order_and_a_full_window_starts_no_store():
    sent: list[int] = []

    async def send(message: ReadingAck) -> None:
        sent.append(message.seq)

    loop = asyncio.get_running_loop()
    stores: dict[int, asyncio.Future[ReadingAck]] = {}

    def start(seq: int) -> asyncio.Future[ReadingAck]:
        stores[seq] = loop.create_future()
        return stores[seq]

    acks = ReadingAcks(send, window=3)
    for seq in (1, 2, 3):
        await acks.submit(partial(start, seq))
    fourth = asyncio.ensure_future(acks.submit(partial(start, 4)))
    await asyncio.sleep(0.01)
    assert 4 not in stores and not fourth.done()  # the window is full: its store has not started
    for seq in (3, 2):  # committed out of order: nothing may go before reading 1's ack
        stores[seq].set_result(ReadingAck(seq, ReadingStatus.STORED))
    await asyncio.sleep(0.01)
    assert sent == [] and not fourth.done()
    stores[1].set_result(ReadingAck(1, ReadingStatus.STORED))
    await asyncio.wait_for(fourth, 1)  # room again: reading 4's store starts
    assert sent == [1, 2, 3] and 4 in stores
    await acks.close()
    assert sent == [1, 2, 3] and stores[4].cancelled()  # dropped with the session, not sent


@pytest.mark.asyncio(loop_scope="session")
async def test_a_burst_of_readings_over_mqtt_is_acked_in_order_each_stored_once(fake_runner, tmp_path):
    cfg = parse_config({"devices": {"database": str(tmp_path / "g.db"), "open_enrolment": True,
                                    "max_readings_per_minute": 0}}, ROOT)
    link = MqttLink("127.0.0.1", 0, embedded=True)
    gateway = Gateway(cfg, fake_runner, [link])
    ready = asyncio.Event()
    task = asyncio.create_task(gateway.serve(ready))
    try:
        await asyncio.wait_for(ready.wait(), 10)
        await asyncio.wait_for(link.connected.wait(), 10)
        dev = MqttDevice("burst-1")
        await dev.connect("127.0.0.1", link.port)
        await dev.send(Hello(device_id="burst-1"))
        assert isinstance(await asyncio.wait_for(dev.receive(), 5), Welcome)
        seqs = list(range(1, 3 * READINGS_IN_FLIGHT + 1)) + [5, 17]  # two resends inside the burst
        for seq in seqs:  # all at once: more than a session takes in flight
            await dev.send(SensorReading(seq, "humidity", 0, HUMID))
        acks = [await asyncio.wait_for(dev.receive(), 10) for _ in seqs]
        assert [a.seq for a in acks] == seqs  # in the order sent
        assert [a.status for a in acks] == [ReadingStatus.STORED] * (len(seqs) - 2) + [ReadingStatus.DUPLICATE] * 2
        rows = await gateway.db.run(list_readings, "burst-1", None, 1000)
        assert sorted(r.seq for r in rows) == seqs[:-2]
        assert gateway.reading_writer is not None and gateway.reading_writer.commits < len(seqs) - 2  # readings that arrived together shared commits
        await dev.close()
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_a_reading_queued_as_the_store_closes_fails_instead_of_waiting(tmp_path):
    store = SqliteReadingStore(Database(tmp_path / "c.db"))
    stored = store.insert("dev-1", SensorReading(1, "humidity", 0, HUMID), 1_700_000_000.0)
    await store.close()  # before the end of this loop pass, where its batch would have gone
    with pytest.raises(StorageFailed):
        await asyncio.wait_for(stored, 5)


async def test_an_ack_is_sent_in_the_loop_pass_after_its_reading_is_stored():
    sent: list[int] = []

    async def send(message: ReadingAck) -> None:
        sent.append(message.seq)

    loop = asyncio.get_running_loop()
    stores = [loop.create_future() for _ in range(3)]
    acks = ReadingAcks(send, window=4)
    for store in stores:
        await acks.submit(lambda store=store: store)
    await asyncio.sleep(0)  # the sender is waiting for the oldest
    for seq, store in enumerate(stores, 1):  # one commit stores them all
        store.set_result(ReadingAck(seq, ReadingStatus.STORED))
    await asyncio.sleep(0)  # one pass: the sender, woken by the oldest, sends every ack that is ready
    assert sent == [1, 2, 3]
    await acks.close()


async def test_the_acks_of_a_commit_are_made_in_the_loop_pass_that_settles_it(tmp_path):
    store = SqliteReadingStore(Database(tmp_path / "s.db"))
    try:
        bus = EventBus()
        events = bus.subscribe(ReadingStored)
        service = ReadingService(store, bus, clock=lambda: 1_700_000_000.0)
        acks = [service.start("dev-1", "p", SensorReading(seq, "humidity", 0, HUMID)) for seq in (1, 2, 3)]
        async with asyncio.timeout(10):
            while store.writer.commits == 0:  # wakes at most once per pass: the pass after the settle at the latest
                await asyncio.sleep(0)
        # no done-callback pass between the commit and its acks (before: the acks came one pass later)
        assert [ack.done() for ack in acks] == [True, True, True]
        assert [ack.result().status for ack in acks] == [ReadingStatus.STORED] * 3
        assert events.queue.qsize() == 3
    finally:
        await store.close()
