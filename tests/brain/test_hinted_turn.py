"""A full gateway turn (in-memory link, fake TTS and ASR, scripted LLM and a LAN screen on 127.0.0.1)
where the model tags its sentences: the tag and emoji become the Action/Sentiment packets sent before
the sentence's audio, the audio says neither, and ReplyText and the screen show the emoji."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import numpy as np
import pytest
import pytest_asyncio
import yaml
from websockets.asyncio.client import connect

from firmware_protocol import (Action, AudioChunk, AudioStart, AudioStop, Capability, Hello, ReplyText, Sentiment,
                              StopReason, TextInput, Welcome)
from gateway.app import Gateway
from gateway.audio.pcm import int16_to_float
from gateway.brain.scripted import Script, ScriptedLlm
from gateway.brain.contract import Sentence
from gateway.config import parse_config
from gateway.expression.hints import parse_hints
from gateway.expression.sentence import Expression
from gateway.links.memory import MemoryLink
from gateway.screens.server import ScreensServer
from tests.conftest import words

pytestmark = pytest.mark.asyncio(loop_scope="session")

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "config"
DEVICE = "box-hinted"
REPLY = ["[happy] 😀 Great to see you again! ", "[surprised] That is great news. ", "Thank you for waiting."]
SHOWN = ["😀 Great to see you again!", "That is great news.", "Thank you for waiting."]


@asynccontextmanager
async def gateway_with(runner, tmp_path: Path, scripts: list[Script]) -> AsyncIterator[tuple[MemoryLink, str]]:
    """A gateway whose LLM is the scripted server: its in-memory link and the screen URL for DEVICE."""
    async with ScriptedLlm(scripts) as llm:
        cfg = parse_config({
            "devices": {"database": str(tmp_path / "gw.db")}, "memory": {"enabled": False},
            "brain": {"providers": [{"name": "scripted", "base_url": llm.url, "model": "m"}]},
        }, ROOT)
        link = MemoryLink()
        screens = ScreensServer("127.0.0.1", 0, "/screen", key="hinted-screen-key")
        ready = asyncio.Event()
        task = asyncio.create_task(Gateway(cfg, runner, [link, screens]).serve(ready))
        await asyncio.wait_for(ready.wait(), 10)
        try:
            yield link, f"ws://127.0.0.1:{screens.port}/screen?device={DEVICE}&key=hinted-screen-key"
        finally:
            task.cancel()


@pytest_asyncio.fixture(loop_scope="session")
async def hinted_gateway(fake_runner, tmp_path):
    async with gateway_with(fake_runner, tmp_path, [Script(REPLY)]) as running:
        yield running


async def hello(link: MemoryLink):
    dev = link.connect()
    await dev.send(Hello(device_id=DEVICE, capabilities=Capability.AUDIO_IN | Capability.AUDIO_OUT | Capability.ACTION))
    assert isinstance(await asyncio.wait_for(dev.receive(), 10), Welcome)
    return dev


async def screen_messages(ws, count: int) -> list[dict]:
    """The next `count` sentence/reply-end messages of the screen."""
    out: list[dict] = []
    while len(out) < count:
        msg = json.loads(await asyncio.wait_for(ws.recv(), 30))
        if msg["Data"].get("Key") in ("audio", "reply_end"):
            out.append(msg)
    return out


async def test_an_llm_sentence_tagged_happy_drives_action_and_sentiment_and_is_shown_with_its_emoji(
        hinted_gateway, fake_transcribe) -> None:
    link, screen_url = hinted_gateway
    meanings = parse_hints(yaml.safe_load((CONFIG / "hints.yaml").read_text(encoding="utf-8"))).meanings
    plain = Expression.from_paths(CONFIG / "action_rules.csv", CONFIG / "sentiment.yaml")
    async with connect(screen_url) as ws:
        await ws.send(json.dumps({"device": DEVICE}))
        while json.loads(await asyncio.wait_for(ws.recv(), 5))["Data"]["Key"] != "subscribed":
            pass
        dev = await hello(link)
        await dev.send(TextInput(text="tell me something nice"))
        got = []
        while not (isinstance(m := await asyncio.wait_for(dev.receive(), 30), ReplyText) and m.final):
            got.append(m)
        closing = m
        shown = await screen_messages(ws, 4)

    streams = [m.stream_id for m in got if isinstance(m, AudioStart)]
    assert len(streams) == 3
    per_stream = {sid: [m for m in got if getattr(m, "stream_id", None) == sid] for sid in streams}
    # Devices get the display text per sentence and in the closing ReplyText.
    assert [next(m.text for m in per_stream[sid] if isinstance(m, ReplyText)) for sid in streams] == SHOWN
    assert closing.text == " ".join(SHOWN)

    def expression(sid: int) -> tuple[Action, Sentiment]:
        msgs = per_stream[sid]
        first_chunk = next(i for i, m in enumerate(msgs) if isinstance(m, AudioChunk))
        (action,) = [m for m in msgs[:first_chunk] if isinstance(m, Action)]  # before the first audio chunk
        (sentiment,) = [m for m in msgs[:first_chunk] if isinstance(m, Sentiment)]
        return action, sentiment

    # [happy]: the mapped action, with behavior/affect/intensity/priority from its row, and its sentiment.
    happy = meanings["happy"]
    row = plain.rules.by_code(happy.action)
    action, sentiment = expression(streams[0])
    assert (action.code, action.behavior, action.affect, action.intensity, action.priority) == (
        row.code, row.behavior, row.affect, round(row.intensity * 100), row.priority)
    assert action.code != plain.rules.match("Great to see you again!").code, "the hint, not the keyword rule"
    assert sentiment.tenths == round(happy.sentiment * 10) > 0
    # [surprised] wins over the higher-priority keyword rule "great" -> emotion.celebrate.
    assert expression(streams[1])[0].code == meanings["surprised"].action == "emotion.surprise"
    # A sentence without hints: exactly what the keyword rules and the lexicon say.
    reference = plain.analyse(Sentence("Thank you for waiting."), [])
    action, sentiment = expression(streams[2])
    assert (action.code, sentiment.tenths) == (reference.action.code, round(reference.sentiment * 10))

    # The audio says the sentence, not the tag.
    pcm = b"".join(m.data for m in per_stream[streams[0]] if isinstance(m, AudioChunk))
    heard = words(fake_transcribe(int16_to_float(np.frombuffer(pcm, "<i2")), 16000))
    assert "happy" not in heard and {"great", "see", "again"} <= set(heard), heard

    # The screen shows the display text, with the hinted action and sentiment.
    assert [m["Data"]["Key"] for m in shown] == ["audio", "audio", "audio", "reply_end"]
    assert [m["Data"]["Text"] for m in shown] == [*SHOWN, " ".join(SHOWN)]
    assert shown[0]["Data"]["Action"]["code"] == happy.action and shown[0]["Data"]["Sentiment"] == happy.sentiment


async def test_after_a_barge_in_the_closing_reply_text_shows_only_the_played_sentences_as_display_text(
        fake_runner, tmp_path) -> None:
    story = ["🙂 Once upon a time there was a small robot that lived in a very big house with many rooms. ",
             "[sad] One day it lost its way. ", "😀 But it found the kitchen again."]
    async with gateway_with(fake_runner, tmp_path, [Script(story), Script(["Okay."])]) as (link, _screen):
        dev = await hello(link)
        await dev.send(TextInput(text="tell me a story"))
        while not isinstance(await asyncio.wait_for(dev.receive(), 30), AudioChunk):
            pass
        await dev.send(TextInput(text="stop"))  # the user interrupts during the first sentence
        got = []
        while not (isinstance(m := await asyncio.wait_for(dev.receive(), 30), ReplyText) and m.final):
            got.append(m)
    assert any(isinstance(g, AudioStop) and g.reason == StopReason.ABORTED for g in got)
    assert m.text == story[0].strip(), "only the played sentence, with its emoji"
