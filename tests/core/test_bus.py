"""The event bus: typed fan-out, never blocking the publisher."""

import asyncio
from dataclasses import dataclass

import pytest

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
