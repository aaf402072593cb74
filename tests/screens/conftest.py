"""A gateway with its device WebSocket and two LAN screen servers (http, and https with a
self-signed certificate made on the fly), all on 127.0.0.1 free ports."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest_asyncio

from gateway.app import Gateway
from gateway.links.websocket import WebSocketLink
from gateway.screens.server import ScreensServer
from gateway.screens.tls import server_context

SCREEN_KEY = "test-screen-key-0123456789"


@dataclass
class ScreensGateway:
    device_url: str
    http: str  # http://127.0.0.1:PORT
    screen_url: str  # ws://127.0.0.1:PORT/screen?key=SCREEN_KEY (add &device=ID)
    server: ScreensServer
    https: str  # https://127.0.0.1:PORT (self-signed)
    key: str = SCREEN_KEY


async def _serve(cfg, runner, tmp_path_factory) -> AsyncIterator[ScreensGateway]:
    link = WebSocketLink("127.0.0.1", 0, cfg.server.websocket_path, cfg.server.max_frame_bytes)
    screens = ScreensServer("127.0.0.1", 0, "/screen", key=SCREEN_KEY)
    certs = tmp_path_factory.mktemp("tls")
    secure = ScreensServer("127.0.0.1", 0, "/screen", tls=server_context(certs / "cert.pem", certs / "key.pem"),
                           key=SCREEN_KEY)
    ready = asyncio.Event()
    task = asyncio.create_task(Gateway(cfg, runner, [link, screens, secure]).serve(ready))
    await asyncio.wait_for(ready.wait(), 10)
    yield ScreensGateway(f"ws://127.0.0.1:{link.port}{cfg.server.websocket_path}",
                         f"http://127.0.0.1:{screens.port}", f"ws://127.0.0.1:{screens.port}/screen?key={SCREEN_KEY}", screens,
                         f"https://127.0.0.1:{secure.port}")
    task.cancel()


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def screens_gateway(cfg, runner, tmp_path_factory) -> AsyncIterator[ScreensGateway]:
    """The gateway with the real models (the browser voice box test speaks to it)."""
    async for running in _serve(cfg, runner, tmp_path_factory):
        yield running


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def fake_screens_gateway(fake_cfg, fake_runner, tmp_path_factory) -> AsyncIterator[ScreensGateway]:
    """The same on the fake engines (fan-out, filters, HTTP audio)."""
    async for running in _serve(fake_cfg, fake_runner, tmp_path_factory):
        yield running
