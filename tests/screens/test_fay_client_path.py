"""A Fay avatar client hard-wired to ws://host:port/ can subscribe when screens.path is "/"."""

from __future__ import annotations

import asyncio
import json
import urllib.request

import pytest
from websockets.asyncio.client import connect

from gateway.bus import EventBus
from gateway.links.base import LinkServices
from gateway.screens.server import ScreensServer
from gateway.voice.events import Transcribed

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def test_a_screen_on_the_root_path_gets_messages_and_the_page_is_still_served() -> None:
    bus = EventBus()
    server = ScreensServer("127.0.0.1", 0, "/", key="fay-screen-key")
    ready = asyncio.Event()
    task = asyncio.create_task(server.serve(None, ready, LinkServices(bus=bus)))
    try:
        await asyncio.wait_for(ready.wait(), 5)
        async with connect(f"ws://127.0.0.1:{server.port}/?key=fay-screen-key") as ws:
            await ws.send(json.dumps({"device": "all"}))
            ack = json.loads(await asyncio.wait_for(ws.recv(), 5))  # the screen is registered now
            assert ack == {"Topic": "gateway", "Data": {"Key": "subscribed", "Device": "all"}}
            bus.publish(Transcribed("box-fay", "你好"))
            msg = json.loads(await asyncio.wait_for(ws.recv(), 5))
        assert msg == {"Topic": "human", "Data": {"Key": "transcript", "Text": "你好", "Type": 1}, "Username": "box-fay"}
        page = await asyncio.to_thread(lambda: urllib.request.urlopen(f"http://127.0.0.1:{server.port}/", timeout=5).read())
        assert b"Hold to talk" in page
    finally:
        task.cancel()
