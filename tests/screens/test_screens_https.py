"""The screen port speaks https and http (gateway/links/tls_or_plain.py): another machine asking
for the page over http is sent to https, this machine keeps plain http, screens may watch over
ws or wss (the key holds on both), and a client that sends nothing or a broken TLS handshake is
closed and logged while the others are served. "Another machine" is this machine's own LAN
address: the server sees a peer that is not loopback."""

from __future__ import annotations

import asyncio
import http.client
import logging
import socket
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import pytest_asyncio
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from gateway.bus import EventBus
from gateway.expression.sentence import SentenceExpression
from gateway.expression.service import SentenceExpressed
from gateway.links import tls_or_plain
from gateway.links.base import LinkServices
from gateway.screens.server import ScreensServer
from gateway.screens.tls import _lan_addresses, server_context
from tests.screens.test_screen_fanout import next_human

pytestmark = pytest.mark.asyncio(loop_scope="session")
KEY = "https-test-key-0123456789"
LAN = next((a for a in _lan_addresses() if not a.startswith("127.")), None)
needs_lan = pytest.mark.skipif(LAN is None, reason="needs a non-loopback address on this machine")
UNVERIFIED = ssl._create_unverified_context()  # the self-signed certificate


@dataclass
class Both:
    server: ScreensServer
    bus: EventBus
    port: int


@pytest_asyncio.fixture(loop_scope="session")
async def both(tmp_path: Path) -> AsyncIterator[Both]:
    bus = EventBus()
    server = ScreensServer("0.0.0.0", 0, "/screen", tls=server_context(tmp_path / "c.pem", tmp_path / "k.pem"), key=KEY)
    ready = asyncio.Event()
    task = asyncio.create_task(server.serve(None, ready, LinkServices(bus=bus)))
    await asyncio.wait_for(ready.wait(), 10)
    yield Both(server, bus, server.port)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


@dataclass
class Reply:
    status_code: int
    headers: dict[str, str]
    text: str


def _get(url: str) -> Reply:
    parts = urlsplit(url)
    conn = (http.client.HTTPSConnection(parts.hostname, parts.port, timeout=10, context=UNVERIFIED)
            if parts.scheme == "https" else http.client.HTTPConnection(parts.hostname, parts.port, timeout=10))
    try:
        conn.request("GET", parts.path + (f"?{parts.query}" if parts.query else ""))
        response = conn.getresponse()  # redirects are not followed
        return Reply(response.status, {k.lower(): v for k, v in response.getheaders()},
                     response.read().decode("utf-8", "replace"))
    finally:
        conn.close()


async def get(url: str) -> Reply:
    return await asyncio.to_thread(_get, url)


@needs_lan
async def test_another_machine_asking_for_the_page_over_http_is_sent_to_https_and_this_machine_keeps_http(both, caplog):
    with caplog.at_level(logging.INFO, logger="gateway.links.web"):
        moved = await get(f"http://{LAN}:{both.port}/?watch=all&key={KEY}")
    assert moved.status_code == 301
    assert moved.headers["location"] == f"https://{LAN}:{both.port}/?watch=all&key={KEY}"
    assert f"http {LAN}:" in caplog.text and "/ over plain http: redirected to https" in caplog.text
    page = await get(moved.headers["location"])
    assert page.status_code == 200 and "Hold to talk" in page.text
    local = await get(f"http://127.0.0.1:{both.port}/")  # this machine: plain http, no certificate to accept
    assert local.status_code == 200 and "Hold to talk" in local.text
    assert (await get(f"https://127.0.0.1:{both.port}/")).status_code == 200
    assert (await get(f"http://{LAN}:{both.port}/config.json")).status_code == 200  # only the page moves


@needs_lan
@pytest.mark.parametrize("scheme", ["ws", "wss"])
async def test_screens_watch_over_ws_or_wss_with_the_key_and_get_audio_urls_of_their_own_scheme(both, scheme):
    base = f"{scheme}://{LAN}:{both.port}/screen?device=all"
    tls = UNVERIFIED if scheme == "wss" else None
    async with connect(base, ssl=tls) as refused:  # the key holds on both
        with pytest.raises(ConnectionClosed) as closed:
            await asyncio.wait_for(refused.recv(), 5)
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 4401
    async with connect(f"{base}&key={KEY}", ssl=tls) as ws:
        async with asyncio.timeout(5):
            while both.server.hub.screens == 0:
                await asyncio.sleep(0.02)
        both.bus.publish(SentenceExpressed("box-tls", 1, _expression(), b"\x00\x00" * 1600, 16000))
        message = await next_human(ws, "audio")
    url = message["Data"]["HttpValue"]
    http = "https" if scheme == "wss" else "http"
    assert url.startswith(f"{http}://{LAN}:{both.port}/audio/") and url.endswith(f".wav?key={KEY}")
    assert (await get(url)).status_code == 200
    assert (await get(url.split("?")[0])).status_code == 401  # the audio needs the key too


async def test_a_client_that_sends_nothing_or_a_broken_tls_handshake_is_closed_and_logged(both, caplog, monkeypatch):
    monkeypatch.setattr(tls_or_plain, "SNIFF_TIMEOUT_S", 0.3)
    with caplog.at_level(logging.INFO, logger="gateway.links.tls_or_plain"):
        silent = socket.create_connection(("127.0.0.1", both.port))
        broken = socket.create_connection(("127.0.0.1", both.port))
        try:
            broken.sendall(b"\x16\x03\x01\x00\x05hello")  # a TLS record header, then nonsense
            assert await asyncio.to_thread(broken.recv, 100) is not None  # closed by the server (b"" or an alert)
            silent.settimeout(10)
            assert await asyncio.to_thread(silent.recv, 100) == b""  # closed after the sniff timeout
        finally:
            silent.close()
            broken.close()
        assert (await get(f"https://127.0.0.1:{both.port}/")).status_code == 200  # everyone else is served
    assert "nothing sent within" in caplog.text
    assert "TLS handshake failed" in caplog.text


def _expression() -> SentenceExpression:
    return SentenceExpression(text="Hi.", action=None, sentiment=0.0, runs=(), levels=(), frame_ms=40,
                              audio_ms=100.0, timed=False)


async def test_the_made_private_key_is_readable_by_its_owner_only(tmp_path):
    server_context(tmp_path / "c.pem", tmp_path / "k.pem")  # makes the pair where there is none
    key = tmp_path / "k.pem"
    assert key.stat().st_mode & 0o777 == 0o600 and key.read_bytes().startswith(b"-----BEGIN PRIVATE KEY")
