"""Memory alerts reach the LAN screens directly (Key `alert`), also when nobody could speak them:
the screens of the alert's devices and the screens watching all devices get it, others do not."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from websockets.asyncio.client import connect

from gateway.bus import EventBus
from gateway.links.base import LinkServices
from gateway.memory.events import Alert
from gateway.screens.server import ScreensServer

pytestmark = pytest.mark.asyncio(loop_scope="session")


@pytest_asyncio.fixture(loop_scope="session")
async def screens() -> AsyncIterator[tuple[str, EventBus]]:
    bus = EventBus()
    server = ScreensServer("127.0.0.1", 0, "/screen", key="alerts-screen-key")
    ready = asyncio.Event()
    task = asyncio.create_task(server.serve(None, ready, LinkServices(bus=bus)))
    await asyncio.wait_for(ready.wait(), 10)
    yield f"ws://127.0.0.1:{server.port}/screen?key=alerts-screen-key", bus
    task.cancel()  # bounded: screens that left while idle must not keep the server from stopping
    await asyncio.wait_for(asyncio.gather(task, return_exceptions=True), 5)


async def _subscribe(ws, device: str) -> None:
    await ws.send(json.dumps({"device": device}))
    while json.loads(await asyncio.wait_for(ws.recv(), 5))["Data"]["Key"] != "subscribed":
        pass


async def test_an_alert_is_shown_on_its_devices_screens_and_on_screens_watching_all(screens) -> None:
    url, bus = screens
    async with connect(f"{url}&device=box-anna") as anna, connect(f"{url}&device=all") as nurse, \
            connect(f"{url}&device=box-bob") as bob:
        for ws, device in ((anna, "box-anna"), (nurse, "all"), (bob, "box-bob")):
            await _subscribe(ws, device)
        bus.publish(Alert("anna", ("bp-anna", "box-anna"), "Blood pressure high (165 over 95 mmHg)", 3, "warning", 1.5e9))
        bus.publish(Alert("household", (), "Fire drill at noon", 4, "reminder", 1.5e9))
        for ws in (anna, nurse):
            first = json.loads(await asyncio.wait_for(ws.recv(), 5))
            assert first == {"Topic": "human", "Username": "anna", "Data": {
                "Key": "alert", "Text": "Blood pressure high (165 over 95 mmHg)", "Type": 2, "Severity": "warning",
                "At": 1.5e9, "Devices": ["bp-anna", "box-anna"]}}
            second = json.loads(await asyncio.wait_for(ws.recv(), 5))
            assert (second["Data"]["Text"], second["Data"]["Devices"]) == ("Fire drill at noon", [])
        only = json.loads(await asyncio.wait_for(bob.recv(), 5))  # bob's screen: only the alert for everyone
        assert only["Data"]["Text"] == "Fire drill at noon"
