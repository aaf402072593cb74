"""The WebSocket link under abuse, with real sockets: the websockets client library is the
attacker, connecting from 127.0.0.2 while the device that must keep being served connects from
127.0.0.1 (both loopback on Linux, so the gateway sees two peer addresses). The gateway runs on
the fake engines with the limits `gateway run` wires (gateway/app_links.py default_links)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from websockets.asyncio.client import ClientConnection
from websockets.exceptions import ConnectionClosed

from firmware_protocol import Error, Ping, Pong, ReadingAck, ReadingStatus, SensorReading, Welcome, decode, encode
from gateway.app import Gateway
from gateway.app_links import default_links
from gateway.config import GatewayConfig, parse_config
from gateway.devices.auth import add_device
from gateway.engines.runner import EngineRunner
from gateway.links.websocket import WebSocketLink
from tests.links.ws_client import closed, hello, next_message, open_from

ROOT = Path(__file__).resolve().parents[2]
ATTACKER, DEVICE = "127.0.0.2", "127.0.0.1"
TEMPERATURE = (("celsius", "C", 21.0),)
ONLY_WEBSOCKET = {"mqtt": {"enabled": False}, "coap": {"enabled": False}, "screens": {"enabled": False},
                  "xiaozhi": {"enabled": False}}


def _cfg(tmp_path: Path, server: dict | None = None, devices: dict | None = None) -> GatewayConfig:
    return parse_config({**ONLY_WEBSOCKET,
                         "server": {"host": "127.0.0.1", "websocket_port": 0, **(server or {})},
                         "devices": {"database": str(tmp_path / "gateway.db"), **(devices or {})}}, ROOT)


@asynccontextmanager
async def serving(cfg: GatewayConfig, runner: EngineRunner) -> AsyncIterator[tuple[Gateway, str]]:
    links = default_links(cfg)
    (ws,) = [link for link in links if isinstance(link, WebSocketLink)]
    gateway = Gateway(cfg, runner, links)
    ready = asyncio.Event()
    task = asyncio.create_task(gateway.serve(ready))
    try:
        await asyncio.wait_for(ready.wait(), 10)
        yield gateway, f"ws://127.0.0.1:{ws.port}{cfg.server.websocket_path}"
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)





async def _ping_ms(ws: ClientConnection, nonce: int) -> float:
    started = time.perf_counter()
    await ws.send(encode(Ping(nonce)))
    while not (isinstance(msg := await next_message(ws), Pong) and msg.nonce == nonce):
        pass
    return (time.perf_counter() - started) * 1000



async def test_connections_over_the_per_peer_cap_are_refused_while_another_device_keeps_its_ping(
        tmp_path: Path, fake_runner: EngineRunner, caplog: pytest.LogCaptureFixture) -> None:
    cfg = _cfg(tmp_path, {"max_sessions": 12, "max_sessions_per_peer": 8})
    caplog.set_level(logging.WARNING)
    async with serving(cfg, fake_runner) as (_, url):
        box, welcome = await hello(url, DEVICE, "box-steady")
        assert isinstance(welcome, Welcome)
        answers = await asyncio.gather(*(hello(url, ATTACKER, f"flood-{i}") for i in range(30)),
                                       return_exceptions=True)
        welcomed = [a for a in answers if not isinstance(a, BaseException) and isinstance(a[1], Welcome)]
        refused = [a for a in answers if not isinstance(a, BaseException) and isinstance(a[1], Error)]
        assert len(welcomed) == 8 and len(refused) == 22
        assert {a[1].code for a in refused} == {"too-many-sessions"}
        assert "server.max_sessions_per_peer" in refused[0][1].text
        assert all([await closed(ws) for ws, _ in refused])
        assert refused[0][0].close_code == 1013
        assert await _ping_ms(box, 1) < 1000  # served all along (a generous bound, not a speed test)
        # the total: 9 held, so 3 more from a third address, then the gateway is full for everyone
        third = [await hello(url, "127.0.0.3", f"third-{i}") for i in range(4)]
        assert [type(m).__name__ for _, m in third] == ["Welcome"] * 3 + ["Error"]
        assert "server.max_sessions" in third[3][1].text
        for ws, _ in welcomed:  # the attacker leaves: its slots are free again
            await ws.close()
        await asyncio.sleep(0.2)
        again, welcome = await hello(url, ATTACKER, "flood-again")
        assert isinstance(welcome, Welcome)
        for ws in (box, again, *(ws for ws, _ in third)):
            await ws.close()
    refusals = [r.getMessage() for r in caplog.records if "too-many-sessions" in r.getMessage()]
    assert refusals and all(f"ws {ATTACKER}:" in line or "ws 127.0.0.3:" in line for line in refusals)
    assert len([line for line in refusals if ATTACKER in line]) == 1  # 22 refusals, one line per interval


async def test_a_connection_that_never_says_hello_is_closed_after_the_hello_timeout(
        tmp_path: Path, fake_runner: EngineRunner) -> None:
    async with serving(_cfg(tmp_path, {"hello_timeout_s": 0.5}), fake_runner) as (_, url):
        silent = [await open_from(url, ATTACKER) for _ in range(5)]
        for ws in silent:
            msg = await next_message(ws)
            assert isinstance(msg, Error) and msg.code == "hello-timeout"
            assert await closed(ws)
        box, welcome = await hello(url, ATTACKER, "box-after")  # the slots were given back
        assert isinstance(welcome, Welcome)
        await box.close()


async def test_a_session_that_goes_silent_gets_a_ping_and_is_closed_unless_it_answers(
        tmp_path: Path, fake_runner: EngineRunner) -> None:
    cfg = _cfg(tmp_path, {"session_idle_s": 0.5, "hello_timeout_s": 0.5})
    async with serving(cfg, fake_runner) as (_, url):
        mute, _ = await hello(url, ATTACKER, "box-mute")
        alive, _ = await hello(url, DEVICE, "box-alive")

        async def answer_pings() -> None:
            try:
                async for frame in alive:
                    if isinstance(msg := decode(frame), Ping):
                        await alive.send(encode(Pong(msg.nonce)))
            except ConnectionClosed:
                pass

        answering = asyncio.create_task(answer_pings())
        assert isinstance(await next_message(mute), Ping)
        msg = await next_message(mute)
        assert isinstance(msg, Error) and msg.code == "idle-timeout"
        assert await closed(mute)
        await asyncio.sleep(1.5)  # three idle periods: pinged each time, answered, still served
        assert answering.done() is False
        answering.cancel()
        assert await _ping_ms(alive, 7) < 1000
        await alive.close()


async def test_wrong_token_guesses_are_throttled_per_peer_address(tmp_path: Path, fake_runner: EngineRunner,
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    cfg = _cfg(tmp_path, devices={"open_enrolment": False, "login_backoff_s": 1.0, "login_backoff_max_s": 60})
    caplog.set_level(logging.WARNING)
    async with serving(cfg, fake_runner) as (gateway, url):
        token = await gateway.db.run(add_device, "box-reg", "")
        codes = []
        for i in range(30):  # one guess per connection, back to back
            ws, answer = await hello(url, ATTACKER, "box-reg", f"guess-{i}")
            assert isinstance(answer, Error)
            codes.append(answer.code)
            await ws.close()
        assert set(codes) == {"auth-failed", "auth-throttled"}
        # exponential: 1, 2, 4, 8 ... s between checked guesses; 30 attempts in under 30 s check at most 5
        assert 1 <= codes.count("auth-failed") <= 5, codes
        assert codes[0] == "auth-failed" and codes[1] == "auth-throttled"
        # another address is not affected: its wrong token is checked, its right one let in
        ws, answer = await hello(url, DEVICE, "box-reg", "not-it")
        assert isinstance(answer, Error) and answer.code == "auth-failed"
        await ws.close()
        ws, answer = await hello(url, "127.0.0.3", "box-reg", token)
        assert isinstance(answer, Welcome)
        await ws.close()
    throttled = [r.getMessage() for r in caplog.records if "auth-throttled" in r.getMessage()]
    assert throttled and all(f"ws {ATTACKER}:" in line and "too many failed logins" in line for line in throttled)


async def test_rotating_device_ids_does_not_get_around_the_reading_limit(tmp_path: Path,
                                                                         fake_runner: EngineRunner) -> None:
    cfg = _cfg(tmp_path, devices={"max_readings_per_minute": 5, "max_readings_per_minute_per_peer": 12})
    async with serving(cfg, fake_runner) as (_, url):
        stored = 0
        for n in range(6):  # six device ids from one address, 5 readings each: within each device's limit
            ws, _ = await hello(url, ATTACKER, f"sensor-{n}")
            for seq in range(5):
                await ws.send(encode(SensorReading(seq, "temperature", 0, TEMPERATURE)))
                ack = await next_message(ws)
                assert isinstance(ack, ReadingAck)
                stored += ack.status == ReadingStatus.STORED
                if ack.status != ReadingStatus.STORED:
                    assert ack.code == "rate-limited" and ATTACKER in ack.text
            await ws.close()
        assert stored == 12  # the address's bucket (the refill over these seconds is below one reading)
        ws, _ = await hello(url, DEVICE, "sensor-other")  # another address has its own
        await ws.send(encode(SensorReading(0, "temperature", 0, TEMPERATURE)))
        ack = await next_message(ws)
        assert isinstance(ack, ReadingAck) and ack.status == ReadingStatus.STORED
        await ws.close()
