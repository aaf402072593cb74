"""Pulling the network mid-conversation, through a running gateway (in-memory link, fake engines, the
scripted LLM behind a TCP proxy on 127.0.0.1 that the test cuts like a pulled cable)."""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path

import pytest

from firmware_protocol import AudioChunk, Hello, ReplyText, TextInput, Welcome
from gateway.app import Gateway
from gateway.brain.scripted import Script, ScriptedLlm
from gateway.config import BrainConfig, parse_config
from gateway.links.memory import MemoryLink
from tests.brain.netcut import CuttableProxy
from tests.brain.test_network_loss import port_of

ROOT = Path(__file__).resolve().parents[2]
CLOSING = "Sorry, I lost the connection."


async def next_of(dev, kind: type, **fields):
    """The next message of `kind` (with these field values) from the gateway, within 10 s."""
    while True:
        msg = await asyncio.wait_for(dev.receive(), 10)
        if isinstance(msg, kind) and all(getattr(msg, k) == v for k, v in fields.items()):
            return msg


async def test_pulling_the_network_mid_conversation_closes_the_reply_and_the_next_turn_is_answered_locally(
        fake_runner, tmp_path, caplog: pytest.LogCaptureFixture) -> None:
    async with ScriptedLlm([Script(["Hi there. ", "The rest never arrives."], mode="stall_after_first")]) as llm, \
            CuttableProxy(port_of(llm)) as proxy:
        cfg = parse_config({
            "devices": {"database": str(tmp_path / "gw.db")}, "memory": {"enabled": False},
            "brain": {"interrupted_reply": CLOSING, "providers": [{
                "name": "scripted", "base_url": proxy.url, "model": "m", "first_token_timeout_s": 0.5,
                "stall_timeout_s": 0.5}]},
        }, ROOT)
        link = MemoryLink()
        ready = asyncio.Event()
        task = asyncio.create_task(Gateway(cfg, fake_runner, [link]).serve(ready))
        try:
            await asyncio.wait_for(ready.wait(), 10)
            dev = link.connect()
            await dev.send(Hello(device_id="cut-box"))
            assert isinstance(await asyncio.wait_for(dev.receive(), 10), Welcome)
            with caplog.at_level(logging.WARNING, logger="gateway.brain"):
                # Turn 1: the LLM's first sentence is heard, then the cable is pulled.
                await dev.send(TextInput(text="tell me a story about a robot"))
                assert (await next_of(dev, ReplyText, final=False)).text == "Hi there."
                await next_of(dev, AudioChunk)
                proxy.blackhole()
                cut = time.monotonic()
                await next_of(dev, ReplyText, final=False, text=CLOSING)
                closing_s = time.monotonic() - cut  # includes the rest of "Hi there." playing
                final = await next_of(dev, ReplyText, final=True)
                assert final.text == f"Hi there. {CLOSING}"
                # Turn 2, the network still down: the local brain answers.
                asked = time.monotonic()
                await dev.send(TextInput(text="and what happened next"))
                await next_of(dev, AudioChunk)
                local_s = time.monotonic() - asked
                final = await next_of(dev, ReplyText, final=True)
            print(f"\nnetwork pulled: closing sentence {1000 * closing_s:.0f} ms after the cut, "
                  f"next turn's local audio {1000 * local_s:.0f} ms after the question")
            assert final.text == BrainConfig().fallback
            # Generous bounds, not speed tests (the total timeout is 30 s); that turn 2 did not wait
            # for a first token at all is shown by the cool-down lines and the one request below.
            assert closing_s < 5, f"closing sentence {1000 * closing_s:.0f} ms after the cut"
            assert local_s < 5, f"local answer audio {1000 * local_s:.0f} ms after the question"
            assert "the reply to cut-box was cut (scripted: stalled (nothing for 0.5 s)); it ends locally" in caplog.text
            # The stall put the provider on cool-down: turn 2 did not wait for its first token.
            assert "provider scripted cooling down for 30 s (stalled (nothing for 0.5 s))" in caplog.text
            assert "every provider failed for cut-box (scripted: cooling down (" in caplog.text
            assert len(llm.requests) == 1
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
