"""An unreachable MQTT broker does not freeze the gateway (issue 13.3): paho's connect, which waits
up to its 5 s connect timeout for a broker that does not answer, runs off the event loop, so a
WebSocket device's ping round trips stay short during the attempts.

The unreachable broker is a listening socket whose accept backlog is full: Linux then drops the
SYNs, so a TCP connect hangs until its timeout, as it does for a host that is down."""

from __future__ import annotations

import asyncio
import logging
import socket
import statistics
import time
from pathlib import Path

import pytest
from websockets.sync.client import connect

from firmware_protocol import Hello, Welcome, decode, encode
from gateway.app import Gateway
from gateway.config import parse_config
from gateway.links.mqtt import MqttLink
from gateway.links.websocket import WebSocketLink

pytestmark = pytest.mark.asyncio(loop_scope="session")
ROOT = Path(__file__).resolve().parents[2]


def ping_for(url: str, seconds: float) -> list[float]:
    """A WebSocket device on its own thread (so its clock does not stop with the gateway's loop):
    Hello, then a ping every 50 ms; the round trips in seconds."""
    with connect(url) as ws:
        ws.send(encode(Hello(device_id="ws-pinger")))
        assert isinstance(decode(ws.recv(timeout=10)), Welcome)
        rtts = []
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            start = time.monotonic()
            assert ws.ping().wait(15), "no pong within 15 s"
            rtts.append(time.monotonic() - start)
            time.sleep(0.05)
    return rtts


def black_hole() -> tuple[socket.socket, list[socket.socket]]:
    """A loopback port where TCP connects hang: backlog 0, filled by one connection never accepted."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(0)
    filler = socket.create_connection(server.getsockname(), timeout=1)
    probe = socket.socket()
    probe.settimeout(0.3)
    try:
        probe.connect(server.getsockname())
        pytest.skip("this kernel accepts connects beyond the backlog: no hanging port to test with")
    except TimeoutError:
        pass
    finally:
        probe.close()
    return server, [filler]


async def test_websocket_pings_keep_their_round_trip_while_the_broker_cannot_be_reached(fake_runner, tmp_path, caplog):
    server, held = black_hole()
    caplog.set_level(logging.INFO)
    cfg = parse_config({"server": {"hello_timeout_s": 30}, "devices": {"database": str(tmp_path / "g.db")}}, ROOT)
    ws_link = WebSocketLink("127.0.0.1", 0, "/ws")
    mqtt = MqttLink("127.0.0.1", server.getsockname()[1])  # an external broker that never answers
    task = asyncio.create_task(Gateway(cfg, fake_runner, [ws_link, mqtt]).serve(asyncio.Event()))
    try:
        async with asyncio.timeout(10):
            while not ws_link.port:
                await asyncio.sleep(0.02)
        # more than one whole 5 s connect attempt and the next one's start
        rtts = await asyncio.to_thread(ping_for, f"ws://127.0.0.1:{ws_link.port}/ws", 7)
        assert "cannot reach 127.0.0.1" in caplog.text and "timed out" in caplog.text, "no connect attempt timed out"
        assert not mqtt.connected.is_set()
        rtts.sort()
        p50, p95 = statistics.median(rtts), rtts[int(len(rtts) * 0.95)]
        print(f"ping round trips during the attempts: n={len(rtts)} p50={p50 * 1000:.1f} ms "
              f"p95={p95 * 1000:.1f} ms max={rtts[-1] * 1000:.1f} ms")
        # A connect on the loop would hold a ping for the whole attempt (>= 5 s); the bound is generous.
        assert rtts[-1] < 1.0, f"a ping took {rtts[-1]:.2f} s: the event loop was blocked"
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        for s in held + [server]:
            s.close()
