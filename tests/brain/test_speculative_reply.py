"""The LLM is asked on the speculative transcript, before the endpoint; a user who goes on talking
withdraws that request (the provider sees it cancelled) and its reply is never heard nor remembered."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import numpy as np

from firmware_protocol import (AudioChunk, AudioFormat, AudioStop, Hello, Message, ReplyText, StopReason,
                              TextInput, Welcome)
from gateway.app import Gateway
from gateway.audio.pcm import float_to_s16le, int16_to_float, resample
from gateway.brain.cloud import CloudBrain
from gateway.brain.llm import LlmProvider
from gateway.brain.scripted import Script, ScriptedLlm
from gateway.config import LlmProviderConfig, parse_config
from gateway.links.memory import MemoryLink
from tests.brain.test_cloud_brain import CTX, local
from tests.conftest import words

ROOT = Path(__file__).resolve().parents[2]
STALE = Script(["A stale answer. ", "It must never be heard."], delay_s=30)  # still streaming when withdrawn
ANSWER = "Paris is the capital of France."
RATE = 16000


@contextlib.asynccontextmanager
async def llm_gateway(runner, tmp_path, scripts: list[Script]):
    """A running gateway (in-memory link, fake engines) whose LLM is a scripted server; a connected device."""
    async with ScriptedLlm(scripts) as llm:
        cfg = parse_config({
            "devices": {"database": str(tmp_path / "gw.db")}, "memory": {"enabled": False},
            "brain": {"providers": [{"name": "scripted", "base_url": llm.url, "model": "m",
                                     "first_token_timeout_s": 5}]},
        }, ROOT)
        link = MemoryLink()
        ready = asyncio.Event()
        task = asyncio.create_task(Gateway(cfg, runner, [link]).serve(ready))
        await asyncio.wait_for(ready.wait(), 10)
        dev = link.connect()
        await dev.send(Hello(device_id="spec-box", audio_in=AudioFormat(sample_rate=RATE)))
        assert isinstance(await asyncio.wait_for(dev.receive(), 10), Welcome)
        try:
            yield dev, llm
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


def spoken(runner, text: str) -> np.ndarray:
    chunks = list(runner.tts.synthesize(text))
    return resample(np.concatenate([int16_to_float(c.pcm) for c in chunks]), chunks[0].sample_rate, RATE)


async def send_audio(dev, audio: np.ndarray) -> None:
    step = RATE * 60 // 1000  # 60 ms chunks
    for seq, i in enumerate(range(0, len(audio), step)):
        await dev.send(AudioChunk(stream_id=1, seq=seq, data=float_to_s16le(audio[i : i + step])))


def silence(ms: int) -> np.ndarray:
    return np.zeros(RATE * ms // 1000, np.float32)


async def until_final_reply(dev, heard: list[Message]) -> str:
    while True:
        msg = await asyncio.wait_for(dev.receive(), 20)
        heard.append(msg)
        if isinstance(msg, ReplyText) and msg.final:
            return msg.text


async def test_a_user_who_goes_on_talking_cancels_the_early_llm_request_and_never_hears_or_keeps_its_reply(
        fake_runner, tmp_path) -> None:
    async with llm_gateway(fake_runner, tmp_path, [STALE, Script([ANSWER])]) as (dev, llm):
        # "What is the capital", then a pause longer than vad.speculative_after_ms (120) but shorter
        # than the endpoint (500): the brain is asked on the partial transcript.
        await send_audio(dev, np.concatenate([silence(300), spoken(fake_runner, "What is the capital"), silence(350)]))
        await asyncio.wait_for(llm.wait_requests(1), 20)
        assert words(llm.requests[0]["messages"][-1]["content"]) == ["what", "is", "the", "capital"]
        # The user goes on: that request is cancelled (the provider sees the client hang up).
        await send_audio(dev, np.concatenate([spoken(fake_runner, "of France?"), silence(900)]))
        await asyncio.wait_for(llm.wait_abandoned(1), 20)
        assert llm.abandoned[0] == 0
        heard: list[Message] = []
        assert await until_final_reply(dev, heard) == ANSWER
        said = [m.text for m in heard if isinstance(m, ReplyText)]
        assert not any("stale" in text.lower() or "never" in text.lower() for text in said), said
        full = llm.requests[-1]["messages"][-1]["content"]
        assert words(full)[:4] == ["what", "is", "the", "capital"] and "france" in words(full)
        # The next request's history has the whole question and its answer, not the withdrawn turn.
        await dev.send(TextInput(text="and where is it"))
        await asyncio.wait_for(llm.wait_requests(len(llm.requests) + 1), 20)
        history = [m for m in llm.requests[-1]["messages"] if m["role"] != "system"]
        assert history == [{"role": "user", "content": full}, {"role": "assistant", "content": ANSWER},
                           {"role": "user", "content": "and where is it"}]
        await until_final_reply(dev, [])


async def test_a_barge_in_during_an_early_asked_reply_stops_it_and_hangs_up_its_llm_request(fake_runner, tmp_path) -> None:
    story = Script(["Once upon a time there was a robot. ", "It cleaned the house every day. ",
                    "Then it slept."], delay_s=30)  # the LLM is still streaming when the user interrupts
    async with llm_gateway(fake_runner, tmp_path, [story]) as (dev, llm):
        await send_audio(dev, np.concatenate([silence(300), spoken(fake_runner, "Tell me a story"), silence(900)]))
        heard: list[Message] = []
        while not isinstance(msg := await asyncio.wait_for(dev.receive(), 20), AudioChunk):
            heard.append(msg)
        assert [m.text for m in heard if isinstance(m, ReplyText)] == ["Once upon a time there was a robot."]
        await send_audio(dev, np.concatenate([spoken(fake_runner, "Stop, please."), silence(100)]))
        while not (isinstance(msg := await asyncio.wait_for(dev.receive(), 20), AudioStop)
                   and msg.reason == StopReason.ABORTED):
            pass
        await asyncio.wait_for(llm.wait_abandoned(1), 10)
        assert llm.abandoned == [0]


async def test_a_withdrawn_reply_leaves_no_turn_in_the_history_even_when_its_first_sentence_was_fetched() -> None:
    async with ScriptedLlm([Script(["The early answer. ", "More of it."], delay_s=30), Script(["Fine."])]) as llm:
        cfg = LlmProviderConfig(name="cloud", base_url=llm.url, model="m", first_token_timeout_s=5)
        brain = CloudBrain(local(), [LlmProvider(cfg)])
        session = brain.session(CTX.device_id)
        replies = session.reply("explain the tides", CTX)
        assert (await anext(replies)).speech == "The early answer."
        session.withdraw()
        await replies.aclose()
        await asyncio.wait_for(llm.wait_abandoned(1), 10)  # closing the reply cancels the HTTP request
        assert brain.history(CTX.device_id).messages() == []
        assert [s.speech async for s in session.reply("how are the waves", CTX)] == ["Fine."]
        assert [m["role"] for m in llm.requests[1]["messages"] if m["role"] != "system"] == ["user"]
        await brain.close()
