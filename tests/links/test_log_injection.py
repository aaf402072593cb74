"""Text from the network cannot forge log lines or flood the log: a request line with a bare line
feed, a screen's ?device= with an encoded one, a device's Error text are logged escaped on one
line (gateway/log_safe.py), and a device's Error reports are throttled. The gateway as `gateway run`
wires it (device port with the xiaozhi endpoints, the screen server), real clients on loopback."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from firmware_protocol import Error, Hello, Ping, Pong, Welcome, decode, encode
from gateway.app import Gateway
from gateway.app_links import default_links
from gateway.config import GatewayConfig, parse_config
from gateway.engines.runner import EngineRunner
from gateway.links.websocket import WebSocketLink
from gateway.log_safe import log_safe
from gateway.screens.server import ScreensServer

ROOT = Path(__file__).resolve().parents[2]
FORGED = "2025-01-01 12:00:00,000 INFO gateway.console.server: console 192.168.1.10:5555: logged in"


def _cfg(tmp_path: Path) -> GatewayConfig:
    return parse_config({"mqtt": {"enabled": False}, "coap": {"enabled": False},
                         "screens": {"host": "127.0.0.1", "port": 0, "tls": False,
                                     "access_key": str(tmp_path / "screens-key")},
                         "server": {"host": "127.0.0.1", "websocket_port": 0},
                         "console": {"password_file": str(tmp_path / "console-password")},
                         "devices": {"database": str(tmp_path / "gateway.db")}}, ROOT)


@asynccontextmanager
async def serving(cfg: GatewayConfig, runner: EngineRunner) -> AsyncIterator[tuple[int, int]]:
    """The device port and the screen server's port."""
    links = default_links(cfg)
    (ws,) = [link for link in links if isinstance(link, WebSocketLink)]
    (screens,) = [link for link in links if isinstance(link, ScreensServer)]
    ready = asyncio.Event()
    task = asyncio.create_task(Gateway(cfg, runner, links).serve(ready))
    try:
        await asyncio.wait_for(ready.wait(), 30)
        yield ws.port, screens.port
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def _one_line_each(caplog: pytest.LogCaptureFixture) -> None:
    for record in caplog.records:
        assert "\n" not in record.getMessage() and "\r" not in record.getMessage(), record.getMessage()


async def test_a_request_line_with_a_line_feed_is_refused_and_logged_on_one_line(
        tmp_path: Path, fake_runner: EngineRunner, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    async with serving(_cfg(tmp_path), fake_runner) as (port, _):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(f"POST /x\n{FORGED} HTTP/1.1\r\nContent-Length: 0\r\n\r\n".encode())
        answer = await asyncio.wait_for(reader.read(), 30)
        writer.close()
    assert answer.startswith(b"HTTP/1.1 400 ")
    _one_line_each(caplog)
    refused = [r.getMessage() for r in caplog.records if "bad request line" in r.getMessage()]
    assert len(refused) == 1 and "POST /x\\n2025-01-01" in refused[0]


async def test_a_screen_device_name_with_a_line_feed_is_logged_escaped(
        tmp_path: Path, fake_runner: EngineRunner, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    async with serving(_cfg(tmp_path), fake_runner) as (_, screens_port):
        forged = "kitchen%0AWARNING%20gateway.console.server:%20console%2010.0.0.7:1:%20logged%20in"
        async with connect(f"ws://127.0.0.1:{screens_port}/screen?device={forged}") as ws:
            with pytest.raises(ConnectionClosed):
                await asyncio.wait_for(ws.recv(), 30)
    _one_line_each(caplog)
    refused = [r.getMessage() for r in caplog.records if "screen refused" in r.getMessage()]
    assert len(refused) == 1 and "(device kitchen\\nWARNING gateway.console.server:" in refused[0]


async def test_a_console_path_with_control_characters_is_logged_escaped(
        tmp_path: Path, fake_runner: EngineRunner, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    async with serving(_cfg(tmp_path), fake_runner) as (_, screens_port):
        reader, writer = await asyncio.open_connection("127.0.0.1", screens_port)
        writer.write(b"GET /console/api/live\x1b[2J\x07 HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
                     b"Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                     b"Sec-WebSocket-Version: 13\r\n\r\n")
        answer = await asyncio.wait_for(reader.read(), 30)
        writer.close()
    assert answer.startswith(b"HTTP/1.1 401 ")  # no session
    _one_line_each(caplog)
    refused = [r.getMessage() for r in caplog.records if "refused: no session" in r.getMessage()]
    assert len(refused) == 1 and "/console/api/live\\x1b[2J\\x07 refused" in refused[0], refused


async def test_a_device_error_report_is_escaped_cut_and_throttled(
        tmp_path: Path, fake_runner: EngineRunner, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    async with serving(_cfg(tmp_path), fake_runner) as (port, _):
        async with connect(f"ws://127.0.0.1:{port}/ws", compression=None) as ws:
            await ws.send(encode(Hello(device_id="box-noisy")))
            assert isinstance(decode(await asyncio.wait_for(ws.recv(), 30)), Welcome)
            await ws.send(encode(Error(code="mic-failed", text=f"ok\n{FORGED}")))
            for _ in range(200):
                await ws.send(encode(Error(code="mic-failed", text="Y" * 60000)))
            await ws.send(encode(Ping(1)))  # answered after every report before it was handled
            while not isinstance(decode(await asyncio.wait_for(ws.recv(), 30)), Pong):
                pass
    _one_line_each(caplog)
    reported = [r.getMessage() for r in caplog.records if "device reported" in r.getMessage()]
    assert len(reported) == 1, f"{len(reported)} lines for 201 reports"  # one per 10 s (LogThrottle)
    assert reported[0].endswith(f"device reported mic-failed: ok\\n{FORGED}")


def test_log_safe_escapes_control_characters_keeps_text_and_cuts_long_text() -> None:
    assert log_safe("厨房 box-1 (é)") == "厨房 box-1 (é)"
    assert log_safe("a\nb\r\x1b[31m\u202e\\n") == "a\\nb\\r\\x1b[31m\\u202e\\\\n"
    assert log_safe("Y" * 300, 10) == "YYYYYYYYYY... (290 more characters)"
