"""The event bus: typed fan-out, never blocking the publisher."""

import asyncio
from dataclasses import dataclass


from gateway.bus import EventBus


@dataclass(frozen=True)
class Ping:
    n: int


@dataclass(frozen=True)
class Other:
    n: int


async def test_subscribers_get_only_the_event_types_they_asked_for():
    bus = EventBus()
    pings, everything = bus.subscribe(Ping), bus.subscribe()
    bus.publish(Ping(1))
    bus.publish(Other(2))
    assert await asyncio.wait_for(pings.get(), 1) == Ping(1)
    assert pings.queue.empty()
    assert [await everything.get(), await everything.get()] == [Ping(1), Other(2)]


async def test_a_slow_subscriber_loses_its_oldest_events_and_the_publisher_never_blocks():
    bus = EventBus()
    slow = bus.subscribe(Ping, maxsize=3)
    for i in range(10):
        bus.publish(Ping(i))
    assert slow.dropped == 7
    assert [await slow.get() for _ in range(3)] == [Ping(7), Ping(8), Ping(9)]


async def test_a_closed_subscription_gets_nothing_more():
    bus = EventBus()
    sub = bus.subscribe(Ping)
    sub.close()
    bus.publish(Ping(1))
    assert sub.queue.empty()


async def test_a_notification_wakes_once_for_any_number_of_events_and_never_drops_or_warns(caplog):
    bus = EventBus()
    wake = bus.notify(Ping)
    for i in range(1000):
        bus.publish(Ping(i))
    bus.publish(Other(0))
    await asyncio.wait_for(wake.wait(), 1)  # the thousand pings: one wake-up
    waiting = asyncio.create_task(wake.wait())
    await asyncio.sleep(0)
    assert not waiting.done()  # nothing new since
    bus.publish(Other(1))
    await asyncio.sleep(0)
    assert not waiting.done()  # not its type
    bus.publish(Ping(1))
    await asyncio.wait_for(waiting, 1)
    assert wake.dropped == 0 and "slow" not in caplog.text
