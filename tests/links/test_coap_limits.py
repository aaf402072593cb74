"""The gateway's session caps hold on the CoAP link too (one PeerLimits shared with the WebSocket
link, gateway/app_links.py default_links), with libcoap's coap-client as the devices and the attacker
(`-a 127.0.0.2`: another source address on loopback)."""

from __future__ import annotations

import asyncio
import logging
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from firmware_protocol import Error, Hello, Welcome, encode
from gateway.app import Gateway
from gateway.app_links import default_links
from gateway.config import parse_config
from gateway.devices.auth import add_device
from gateway.links.coap import CoapLink
from gateway.links.websocket import WebSocketLink
from tests.links.test_coap_link import coap_client, free_udp_port
from tests.links.ws_client import hello as ws_hello

pytestmark = [
    pytest.mark.asyncio(loop_scope="session"),
    pytest.mark.skipif(shutil.which("coap-client-notls") is None, reason="needs libcoap3-bin"),
]
ROOT = Path(__file__).resolve().parents[2]


@pytest_asyncio.fixture(loop_scope="session")
async def capped(fake_runner, tmp_path) -> AsyncIterator[tuple[str, CoapLink, WebSocketLink]]:
    cfg = parse_config({"devices": {"database": str(tmp_path / "g.db")},
                        "server": {"host": "127.0.0.1", "websocket_port": 0, "max_sessions": 3, "max_sessions_per_peer": 2},
                        "mqtt": {"enabled": False}, "screens": {"enabled": False}, "xiaozhi": {"enabled": False},
                        "coap": {"port": free_udp_port()}}, ROOT)
    links = default_links(cfg)
    [coap] = [x for x in links if isinstance(x, CoapLink)]
    [ws] = [x for x in links if isinstance(x, WebSocketLink)]
    task = asyncio.create_task(Gateway(cfg, fake_runner, links).serve(ready := asyncio.Event()))
    await asyncio.wait_for(ready.wait(), 10)
    yield f"coap://127.0.0.1:{coap.port}/gw", coap, ws
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def _hello(base: str, device: str, source: str, tmp_path: Path):
    payload = tmp_path / f"hello-{device}.bin"
    payload.write_bytes(encode(Hello(device_id=device)))
    [answer, *_] = await coap_client("-a", source, "-m", "post", "-f", str(payload), f"{base}/{device}/up")
    return answer


async def test_coap_hellos_over_the_per_peer_and_total_caps_are_refused(capped, tmp_path, caplog):
    base, coap, ws = capped
    caplog.set_level(logging.WARNING)
    answers = [await _hello(base, f"coap-flood-{i}", "127.0.0.2", tmp_path) for i in range(3)]
    assert [type(a) for a in answers] == [Welcome, Welcome, Error]
    assert answers[2].code == "too-many-sessions" and "server.max_sessions_per_peer" in answers[2].text
    assert isinstance(await _hello(base, "coap-device", "127.0.0.1", tmp_path), Welcome)  # another address
    full = await _hello(base, "coap-third", "127.0.0.3", tmp_path)  # 3 sessions: the gateway is full
    assert isinstance(full, Error) and full.code == "too-many-sessions" and "(server.max_sessions)" in full.text
    assert coap.limits is ws.limits and ws.limits.sessions == 3  # one count for both links
    assert "coap 127.0.0.2" in caplog.text and "too-many-sessions: Hello refused" in caplog.text


async def test_forged_coap_hellos_from_a_websocket_devices_address_do_not_lock_that_device_out(fake_runner, tmp_path):
    """UDP source addresses can be forged: wrong-token Hellos over CoAP "from" 127.0.0.2 lock out
    CoAP logins from there, not the WebSocket device at 127.0.0.2 with its right token."""
    cfg = parse_config({"devices": {"database": str(tmp_path / "g.db"), "open_enrolment": False},
                        "server": {"host": "127.0.0.1", "websocket_port": 0},
                        "mqtt": {"enabled": False}, "screens": {"enabled": False}, "xiaozhi": {"enabled": False},
                        "coap": {"port": free_udp_port()}}, ROOT)
    links = default_links(cfg)
    [coap] = [x for x in links if isinstance(x, CoapLink)]
    [ws] = [x for x in links if isinstance(x, WebSocketLink)]
    gateway = Gateway(cfg, fake_runner, links)
    task = asyncio.create_task(gateway.serve(ready := asyncio.Event()))
    try:
        await asyncio.wait_for(ready.wait(), 10)
        token = await gateway.db.run(add_device, "ws-victim", "")
        base = f"coap://127.0.0.1:{coap.port}/gw"
        payload = tmp_path / "forged.bin"
        payload.write_bytes(encode(Hello(device_id="ws-victim", token="guess")))
        for _ in range(2):  # the second is throttled: CoAP's lock-out for that address works
            await coap_client("-a", "127.0.0.2", "-m", "post", "-f", str(payload), f"{base}/ws-victim/up")
        assert coap.limits.login_wait("coap 127.0.0.2") > 0
        conn, answer = await ws_hello(f"ws://127.0.0.1:{ws.port}{cfg.server.websocket_path}", "127.0.0.2",
                                      "ws-victim", token)
        await conn.close()
        assert isinstance(answer, Welcome), answer  # before: auth-throttled, the token never checked
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
