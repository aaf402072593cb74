"""AsyncPaho's reads: the publishes waiting in the socket are read in one loop pass (paho alone
reads one per wake-up when the client has nothing of its own in flight), up to READS_PER_PASS
(a real mosquitto)."""

from __future__ import annotations

import array
import asyncio
import fcntl
import select
import termios
import time

import pytest

from gateway.links.mqtt_client import READS_PER_PASS, AsyncPaho

pytestmark = pytest.mark.asyncio(loop_scope="session")

TOPIC, PAYLOAD = "t/burst", b"0123456789"
# subscribed at QoS 0: mosquitto would hold QoS 1 publishes past 20 unacknowledged (max_inflight_messages)
PACKET_BYTES = 2 + 2 + len(TOPIC) + len(PAYLOAD)  # a QoS 0 PUBLISH: header, topic, payload


def _wait_until_unread(sock, n: int, timeout: float = 10) -> None:
    """Block (the loop too: the receiver must not read meanwhile) until `n` bytes wait in `sock`."""
    unread = array.array("i", [0])
    deadline = time.monotonic() + timeout
    while True:
        fcntl.ioctl(sock, termios.FIONREAD, unread)
        if unread[0] >= n or time.monotonic() > deadline:
            return
        select.select([], [], [], 0.01)  # poll the byte count again; bounded by `timeout`


async def test_a_burst_of_publishes_is_read_in_one_pass_up_to_the_bound(mosquitto):
    got: list[bytes] = []
    subscribed = asyncio.Event()
    receiver = AsyncPaho("burst-receiver", lambda msg: got.append(msg.payload), persistent=False,
                         on_connect=lambda: receiver.subscribe(TOPIC, 0))
    receiver.client.on_subscribe = lambda *args: subscribed.set()
    sender = AsyncPaho("burst-sender", lambda msg: None, persistent=False)
    await receiver.connect("127.0.0.1", mosquitto.port)
    await asyncio.wait_for(subscribed.wait(), 10)
    await sender.connect("127.0.0.1", mosquitto.port)
    count = READS_PER_PASS + 10
    for _ in range(count):
        sender.publish(TOPIC, PAYLOAD, 0)  # (paho keeps QoS 1 ones past 20 in flight)
    sender.flush()
    _wait_until_unread(receiver.client.socket(), count * PACKET_BYTES)
    await asyncio.sleep(0)  # one loop pass: the receiver's socket is polled, its reader queued
    await asyncio.sleep(0)  # the reader has run once
    assert len(got) == READS_PER_PASS  # (paho alone: 1) the rest in the next pass, after the others
    for _ in range(100):
        if len(got) == count:
            break
        await asyncio.sleep(0)
    assert got == [PAYLOAD] * count
    await sender.disconnect()
    await receiver.disconnect()
