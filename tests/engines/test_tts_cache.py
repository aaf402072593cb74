"""The TTS cache (tts.cache_seconds): a text said again is answered from memory, without a TTS
worker; bounded by seconds of audio, least recently used out first. Counts and events, no timing."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import numpy as np
import pytest

from gateway.config import parse_config
from gateway.engines.base import SynthChunk
from gateway.engines.fake import FakeAsr, FakeTts, FakeVad
from gateway.engines.runner import EngineRunner
from gateway.engines.tts_cache import TtsCache

RATE = 1000


def _chunk(seconds: float) -> list[SynthChunk]:
    return [SynthChunk(pcm=np.ones(int(seconds * RATE), np.int16), sample_rate=RATE)]


def test_a_text_put_is_got_back_until_newer_ones_push_it_out_by_seconds_of_audio() -> None:
    cache = TtsCache(seconds=3.0)
    cache.put("a", _chunk(1.0))
    cache.put("b", _chunk(1.0))
    assert cache.get("a") is not None  # a is now the most recently used
    cache.put("c", _chunk(1.5))  # 3.5 s: the least recently used (b) goes
    assert cache.get("b") is None and cache.get("a") is not None and cache.get("c") is not None
    assert cache.held_s == pytest.approx(2.5)
    cache.put("long", _chunk(3.5))  # longer than the whole cache: not kept, nothing pushed out
    assert cache.get("long") is None and cache.held_s == pytest.approx(2.5)
    assert (cache.hits, cache.misses) == (3, 2)


def test_the_chunks_handed_out_cannot_be_written_into() -> None:
    cache = TtsCache(seconds=10.0)
    cache.put("hello", _chunk(0.5))
    (chunk,) = cache.get("hello") or []
    with pytest.raises(ValueError):
        chunk.pcm[0] = 7


class _CountingTts(FakeTts):
    def __init__(self) -> None:
        super().__init__()
        self.texts: list[str] = []
        self.hold = threading.Event()
        self.hold.set()
        self.entered = threading.Event()

    def synthesize(self, text: str) -> Iterator[SynthChunk]:
        self.texts.append(text)
        self.entered.set()
        self.hold.wait(30)
        yield from super().synthesize(text)


@pytest.mark.asyncio(loop_scope="session")
async def test_the_runner_synthesizes_a_text_once_and_answers_it_again_from_the_cache() -> None:
    tts = _CountingTts()
    runner = EngineRunner(FakeVad(), FakeAsr(), tts, tts_cache=TtsCache(60.0))
    try:
        first = await runner.synthesize("Sorry, I did not catch that.")
        again = await runner.synthesize("Sorry, I did not catch that.")
        other = await runner.synthesize("Hello!")
    finally:
        runner.close()
    assert tts.texts == ["Sorry, I did not catch that.", "Hello!"]
    assert np.array_equal(first[0].pcm, again[0].pcm) and first[0].phonemes == again[0].phonemes
    assert other[0].pcm.size != first[0].pcm.size
    assert runner.tts_cancels.calls == 2  # the cached answer took no worker


@pytest.mark.asyncio(loop_scope="session")
async def test_a_cached_text_does_not_wait_behind_a_synthesis_holding_the_only_worker() -> None:
    tts = _CountingTts()
    runner = EngineRunner(FakeVad(), FakeAsr(), tts, tts_workers=1, tts_cache=TtsCache(60.0))
    try:
        await runner.synthesize("Hello!")
        tts.hold.clear()
        tts.entered.clear()
        busy = asyncio.create_task(runner.synthesize("A long later sentence of another box."))
        await asyncio.to_thread(tts.entered.wait, 30)  # the only worker is held
        assert runner.tts_admission.busy == 1
        cached = await asyncio.wait_for(runner.synthesize("Hello!"), 30)
        assert cached and not busy.done()
        tts.hold.set()
        await busy
    finally:
        tts.hold.set()
        runner.close()


@pytest.mark.asyncio(loop_scope="session")
async def test_without_a_cache_every_text_is_synthesized() -> None:
    tts = _CountingTts()
    runner = EngineRunner(FakeVad(), FakeAsr(), tts)
    try:
        await runner.synthesize("Hello!")
        await runner.synthesize("Hello!")
    finally:
        runner.close()
    assert tts.texts == ["Hello!", "Hello!"]


def test_the_cache_is_a_minute_by_default_and_zero_turns_it_off() -> None:
    assert parse_config({}).tts.cache_seconds == 60.0
    assert parse_config({"tts": {"cache_seconds": 0}}).tts.cache_seconds == 0.0
