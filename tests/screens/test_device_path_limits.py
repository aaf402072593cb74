"""The screen server's /device path (the page's browser voice box) is served within the same
per-address limits as the device WebSocket /ws: the gateway as `gateway run` wires it
(gateway/app_links.py default_links, one PeerLimits for both ports), real websockets clients from
127.0.0.2 (the attacker) and 127.0.0.1 (both loopback on Linux: two peer addresses)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from firmware_protocol import Error, Ping, Welcome
from gateway.app import Gateway
from gateway.app_links import default_links
from gateway.config import GatewayConfig, parse_config
from gateway.devices.auth import add_device
from gateway.engines.runner import EngineRunner
from gateway.links.websocket import WebSocketLink
from gateway.screens.server import ScreensServer
from tests.links.ws_client import closed, hello, next_message

ROOT = Path(__file__).resolve().parents[2]
ATTACKER, DEVICE = "127.0.0.2", "127.0.0.1"


def _cfg(tmp_path: Path, server: dict | None = None, devices: dict | None = None) -> GatewayConfig:
    return parse_config({"mqtt": {"enabled": False}, "coap": {"enabled": False}, "xiaozhi": {"enabled": False},
                         "screens": {"host": "127.0.0.1", "port": 0, "tls": False,
                                     "access_key": str(tmp_path / "screens-key")},
                         "server": {"host": "127.0.0.1", "websocket_port": 0, **(server or {})},
                         "console": {"password_file": str(tmp_path / "console-password")},
                         "devices": {"database": str(tmp_path / "gateway.db"), **(devices or {})}}, ROOT)


@asynccontextmanager
async def serving(cfg: GatewayConfig, runner: EngineRunner) -> AsyncIterator[tuple[Gateway, str, str]]:
    """The gateway; its /ws URL and its screen server's /device URL."""
    links = default_links(cfg)
    (ws,) = [link for link in links if isinstance(link, WebSocketLink)]
    (screens,) = [link for link in links if isinstance(link, ScreensServer)]
    gateway = Gateway(cfg, runner, links)
    ready = asyncio.Event()
    task = asyncio.create_task(gateway.serve(ready))
    try:
        await asyncio.wait_for(ready.wait(), 30)
        yield gateway, f"ws://127.0.0.1:{ws.port}{cfg.server.websocket_path}", f"ws://127.0.0.1:{screens.port}/device"
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)





async def hello_from(url: str, source: str, device: str, token: str = ""):
    return await hello(url, source, device, token, timeout=30)


async def next_in(ws, timeout: float = 30):
    return await next_message(ws, timeout)


async def test_the_per_peer_cap_holds_on_the_screens_device_path_and_counts_the_device_port_too(
        tmp_path: Path, fake_runner: EngineRunner, caplog: pytest.LogCaptureFixture) -> None:
    cfg = _cfg(tmp_path, {"max_sessions": 6, "max_sessions_per_peer": 3})
    caplog.set_level(logging.WARNING)
    async with serving(cfg, fake_runner) as (_, ws_url, device_url):
        answers = [await hello_from(device_url, ATTACKER, f"page-{i}") for i in range(5)]
        assert [type(m).__name__ for _, m in answers] == ["Welcome"] * 3 + ["Error"] * 2
        for ws, refusal in answers[3:]:
            assert refusal.code == "too-many-sessions" and "server.max_sessions_per_peer" in refusal.text
            assert await closed(ws, 30) and ws.close_code == 1013
        # the same address on the device port: its slots are taken already (one PeerLimits)
        other_port, refusal = await hello_from(ws_url, ATTACKER, "box-on-ws")
        assert isinstance(refusal, Error) and refusal.code == "too-many-sessions"
        # another address is served on both, until the gateway's total is reached
        mine = [await hello_from(url, DEVICE, f"box-{i}") for i, url in enumerate((device_url, ws_url, device_url))]
        assert [type(m).__name__ for _, m in mine] == ["Welcome"] * 3
        full, refusal = await hello_from(device_url, "127.0.0.3", "box-third")
        assert isinstance(refusal, Error) and "server.max_sessions" in refusal.text
        for ws, _ in (*answers[:3], *mine):  # the attacker and the others leave: the slots are free again
            await ws.close()
        await asyncio.sleep(0.2)
        again, welcome = await hello_from(device_url, ATTACKER, "page-again")
        assert isinstance(welcome, Welcome)
        await again.close()
    refusals = [r.getMessage() for r in caplog.records if "too-many-sessions" in r.getMessage()]
    assert any(line.startswith(f"ws {ATTACKER}:") and "server.max_sessions_per_peer" in line for line in refusals)


async def test_wrong_token_guesses_on_the_screens_device_path_are_throttled_like_on_the_device_port(
        tmp_path: Path, fake_runner: EngineRunner, caplog: pytest.LogCaptureFixture) -> None:
    cfg = _cfg(tmp_path, devices={"open_enrolment": False, "login_backoff_s": 1.0, "login_backoff_max_s": 60})
    caplog.set_level(logging.WARNING)
    async with serving(cfg, fake_runner) as (gateway, ws_url, device_url):
        token = await gateway.db.run(add_device, "box-reg", "")
        codes = []
        for i in range(20):  # one guess per connection, back to back
            ws, answer = await hello_from(device_url, ATTACKER, "box-reg", f"guess-{i}")
            assert isinstance(answer, Error)
            codes.append(answer.code)
            await ws.close()
        # exponential: 1, 2, 4, 8 ... s between checked guesses; 20 attempts in under 20 s check at most 5
        assert codes[0] == "auth-failed" and codes[1] == "auth-throttled"
        assert 1 <= codes.count("auth-failed") <= 5, codes
        # the lock-out is the address's, on the device port too
        ws, answer = await hello_from(ws_url, ATTACKER, "box-reg", token)
        assert isinstance(answer, Error) and answer.code == "auth-throttled"
        await ws.close()
        ws, answer = await hello_from(device_url, "127.0.0.3", "box-reg", token)  # another address gets in
        assert isinstance(answer, Welcome)
        await ws.close()
    throttled = [r.getMessage() for r in caplog.records if "auth-throttled" in r.getMessage()]
    assert throttled and all(f"ws {ATTACKER}:" in line and "too many failed logins" in line for line in throttled)


async def test_a_silent_page_voice_box_gets_a_ping_and_is_closed(tmp_path: Path, fake_runner: EngineRunner) -> None:
    cfg = _cfg(tmp_path, {"session_idle_s": 0.5, "hello_timeout_s": 0.5})
    async with serving(cfg, fake_runner) as (_, _ws_url, device_url):
        mute, welcome = await hello_from(device_url, DEVICE, "page-mute")
        assert isinstance(welcome, Welcome)
        assert isinstance(await next_in(mute), Ping)
        msg = await next_in(mute)
        assert isinstance(msg, Error) and msg.code == "idle-timeout"
        assert await closed(mute, 30)
