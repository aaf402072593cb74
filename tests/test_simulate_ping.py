"""`gateway simulate`'s virtual box answers the gateway's Ping like a real box: a push-to-talk box
that waits for a reply longer than server.session_idle_s (an ASR as slow as on an emulated Pi)
keeps its session and hears the reply, on the gateway `gateway run` wires (default_links, with
the idle check), over a real loopback WebSocket."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from gateway.app import Gateway
from gateway.app_links import default_links
from gateway.cli.virtual_box import simulate
from gateway.config import parse_config
from gateway.engines.fake import FakeAsr, FakeTts, FakeVad
from gateway.engines.runner import EngineRunner
from gateway.links.websocket import WebSocketLink
from tests.conftest import speaker_of

pytestmark = pytest.mark.asyncio
ROOT = Path(__file__).resolve().parents[1]
IDLE_S, PROBE_S, ASR_S = 0.3, 0.5, 3.0  # the decode outlasts the idle time and its Ping's probe several times


class SlowAsr(FakeAsr):
    def transcribe(self, audio: np.ndarray, cancel: threading.Event | None = None) -> str:
        time.sleep(ASR_S)
        return super().transcribe(audio, cancel)


async def test_a_push_to_talk_box_waiting_for_a_slow_reply_answers_the_pings_and_gets_the_reply(tmp_path):
    cfg = parse_config({"mqtt": {"enabled": False}, "coap": {"enabled": False}, "screens": {"enabled": False},
                        "xiaozhi": {"enabled": False},
                        "server": {"host": "127.0.0.1", "websocket_port": 0, "session_idle_s": IDLE_S,
                                   "hello_timeout_s": PROBE_S},
                        "devices": {"database": str(tmp_path / "gateway.db")}}, ROOT)
    runner = EngineRunner(FakeVad(), SlowAsr(), FakeTts())
    links = default_links(cfg)
    (ws,) = [link for link in links if isinstance(link, WebSocketLink)]
    ready = asyncio.Event()
    task = asyncio.create_task(Gateway(cfg, runner, links).serve(ready))
    try:
        await asyncio.wait_for(ready.wait(), 30)
        audio, rate = speaker_of(runner.tts)("What time is it?")
        result = await simulate(f"ws://127.0.0.1:{ws.port}{cfg.server.websocket_path}", audio, rate,
                                device_id="slow-box", push_to_talk=True, speed=0, timeout=120)
        assert result.errors == []  # no idle-timeout
        assert result.transcript == "What time is it" and result.reply_text.startswith("It is")
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        runner.close()
