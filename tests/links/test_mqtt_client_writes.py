"""AsyncPaho's writes: what a loop pass queued goes out at its end; what the socket cannot take at
once waits for it to be writable (a real mosquitto)."""

from __future__ import annotations

import asyncio

import pytest

from gateway.links.mqtt_client import AsyncPaho

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def _loopback(mosquitto, client_id: str, count: int, size: int) -> list[bytes]:
    got: list[bytes] = []
    all_in = asyncio.Event()
    subscribed = asyncio.Event()

    def on_message(msg) -> None:
        got.append(msg.payload)
        if len(got) == count:
            all_in.set()

    client = AsyncPaho(client_id, on_message, persistent=False, on_connect=lambda: client.subscribe("t/w", 1))
    client.client.on_subscribe = lambda *args: subscribed.set()
    await client.connect("127.0.0.1", mosquitto.port)
    await asyncio.wait_for(subscribed.wait(), 10)
    payloads = [bytes([i % 256]) * size for i in range(count)]
    for payload in payloads:  # all in one loop pass
        client.publish("t/w", payload, 1)
    await asyncio.wait_for(all_in.wait(), 60)
    assert not client.client.want_write()
    await client.disconnect()
    return got


async def test_many_small_publishes_of_one_pass_all_arrive_in_order(mosquitto):
    got = await _loopback(mosquitto, "small-writes", 500, 40)
    assert got == [bytes([i % 256]) * 40 for i in range(500)]


async def test_publishes_larger_than_the_socket_takes_at_once_all_arrive(mosquitto):
    # 48 x 512 KB queued at once: far more than a loopback socket buffer, so the rest of the
    # write waits for the socket to be writable (the writer callback), then goes on
    got = await _loopback(mosquitto, "big-writes", 48, 512 * 1024)
    assert got == [bytes([i % 256]) * (512 * 1024) for i in range(48)]
