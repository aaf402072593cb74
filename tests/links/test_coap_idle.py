"""CoAP sessions expire when the device goes silent (coap.session_idle_s), with libcoap's
coap-client as the device and a 1 s idle time (we wait on the registry, bounded)."""

from __future__ import annotations

import asyncio
import logging
import shutil
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from firmware_protocol import Error, Hello, Ping, Pong, SensorReading, Welcome
from gateway.app import Gateway
from gateway.app_links import default_links
from gateway.config import parse_config
from gateway.devices.registry import SessionRegistry
from gateway.links.coap import CoapLink
from tests.links.test_coap_link import BaseUri, coap_client, free_udp_port, hello, post

pytestmark = [
    pytest.mark.asyncio(loop_scope="session"),
    pytest.mark.skipif(shutil.which("coap-client-notls") is None, reason="needs libcoap3-bin"),
]
ROOT = Path(__file__).resolve().parents[2]
IDLE_S = 1.0


@pytest_asyncio.fixture(loop_scope="session")
async def quick(fake_runner, tmp_path) -> AsyncIterator[tuple[BaseUri, SessionRegistry]]:
    cfg = parse_config({"devices": {"database": str(tmp_path / "g.db")}, "server": {"host": "127.0.0.1"},
                        "coap": {"port": free_udp_port(), "session_idle_s": IDLE_S}}, ROOT)
    [link] = [x for x in default_links(cfg) if isinstance(x, CoapLink)]  # built from the config key
    assert link.session_idle_s == IDLE_S
    gateway = Gateway(cfg, fake_runner, [link])
    ready = asyncio.Event()
    task = asyncio.create_task(gateway.serve(ready))
    await asyncio.wait_for(ready.wait(), 10)
    yield BaseUri(f"coap://127.0.0.1:{link.port}/gw", link), gateway.registry
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


def online(device: str):
    return lambda registry: device in registry.connected()


def offline(device: str):
    return lambda registry: device not in registry.connected()


async def test_a_silent_coap_device_goes_offline_after_the_idle_time_and_must_say_hello_again(quick, tmp_path, caplog):
    base, registry = quick
    token = await hello(base, "coap-quiet", tmp_path)
    await registry.wait_until(online("coap-quiet"), 5)
    heard = time.monotonic()
    with caplog.at_level(logging.INFO, logger="gateway.links.coap"):
        await registry.wait_until(offline("coap-quiet"), 5 * IDLE_S)
    assert time.monotonic() - heard >= IDLE_S * 0.9
    assert "(coap-quiet): no request or observe refresh for 1 s (coap.session_idle_s); session closed" in caplog.text
    [err] = await post(base, "coap-quiet", SensorReading(1, "humidity", 0, (("percent", "%", 40.0),)), tmp_path,
                       token=token)
    assert isinstance(err, Error) and err.code == "hello-required"  # a new session, nothing stored blindly
    assert isinstance((await post(base, "coap-quiet", Hello(device_id="coap-quiet"), tmp_path))[0], Welcome)
    await registry.wait_until(online("coap-quiet"), 5)


async def test_a_device_that_keeps_posting_or_fetching_its_downlink_stays_online_past_the_idle_time(quick, tmp_path):
    base, registry = quick
    token = await hello(base, "coap-chatty", tmp_path)
    await registry.wait_until(online("coap-chatty"), 5)
    started = time.monotonic()
    rounds = 0
    while time.monotonic() - started < 2.5 * IDLE_S:  # the device's own pace: a request every ~0.3 s
        if rounds % 2:
            assert isinstance((await post(base, "coap-chatty", Ping(nonce=rounds), tmp_path, token=token))[0], Pong)
        else:
            await coap_client("-m", "get", f"{base}/coap-chatty/down?s={token}")  # a fetch of its downlink
        assert online("coap-chatty")(registry), f"went offline after {time.monotonic() - started:.1f} s"
        rounds += 1
        await asyncio.sleep(0.3 * IDLE_S)
    await registry.wait_until(offline("coap-chatty"), 5 * IDLE_S)  # and once it stops, it expires


async def test_a_device_observing_its_downlink_is_told_404_when_its_session_expires(quick, tmp_path):
    base, registry = quick
    token = await hello(base, "coap-ear", tmp_path)
    observer = await asyncio.create_subprocess_exec(
        "coap-client-notls", "-s", "30", "-B", "30", f"{base}/coap-ear/down?s={token}", stderr=asyncio.subprocess.PIPE)
    try:
        assert observer.stderr is not None
        await registry.wait_until(offline("coap-ear"), 5 * IDLE_S)  # the observe alone does not keep it alive
        line = await asyncio.wait_for(observer.stderr.readline(), 5)
        assert line.decode().strip() == "4.04 session ended after 1 s idle; send Hello"
    finally:
        observer.kill()
        await observer.wait()
