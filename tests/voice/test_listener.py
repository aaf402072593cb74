"""The Listener on the fake engines: microphone audio at the device's rate -> endpointing events and
the utterance's audio (pre-roll included), with the real resampler and endpointing state machine."""

from __future__ import annotations

import numpy as np
import pytest

from gateway.audio.pcm import resample
from gateway.engines.fake import FakeAsr, FakeVad
from gateway.voice.endpointing import Endpointer, Event
from gateway.voice.listener import Listener

pytestmark = pytest.mark.asyncio(loop_scope="session")


def listener(runner, rate: int = 16000, preroll_ms: int = 300) -> Listener:
    return Listener(runner, FakeVad(), Endpointer(150, 500, 120, 20_000), rate, preroll_ms)


def silence(ms: int, rate: int = 16000) -> np.ndarray:
    return np.zeros(rate * ms // 1000, np.float32)


async def feed(lst: Listener, audio: np.ndarray, rate: int, chunk_ms: int = 20) -> list:
    step = rate * chunk_ms // 1000
    heard = []
    for i in range(0, len(audio), step):
        heard += await lst.feed(audio[i : i + step])
    return heard


@pytest.mark.parametrize("rate", [8000, 16000, 48000])
async def test_speech_then_silence_gives_start_speculate_endpoint_and_the_whole_utterance(
        fake_runner, fake_speak, rate) -> None:
    said, tts_rate = fake_speak("What time is it?")  # 300 ms lead-in silence, then 640 ms of speech
    mic = np.concatenate([resample(said, tts_rate, rate), silence(700, rate)])
    lst = listener(fake_runner, rate)
    heard, step = [], rate * 20 // 1000
    for i in range(0, len(mic), step):
        heard += await lst.feed(mic[i : i + step])
        if heard[-1:] and heard[-1].event is Event.SPECULATE:
            at_speculate = lst.utterance_audio()  # what the speculative decode gets
        if heard[-1:] and heard[-1].event is Event.ENDPOINT:
            at_endpoint = lst.utterance_audio()
            break
    assert [h.event for h in heard] == [Event.SPEECH_START, Event.SPECULATE, Event.ENDPOINT]
    start, speculate, endpoint = (h.audio_ms for h in heard)
    assert 300 + 150 - 32 <= start <= 300 + 150 + 64  # min speech, give or take a VAD window
    assert speculate - 120 == pytest.approx(300 + 640, abs=64)  # trailing silence counted from the end
    assert endpoint - speculate == pytest.approx(500 - 120, abs=33)
    assert FakeAsr().transcribe(at_speculate) == "What time is it?"
    assert FakeAsr().transcribe(at_endpoint) == "What time is it?"  # the pre-roll kept the onset
    lst.end_utterance()
    assert lst.utterance_audio().size == 0


async def test_without_pre_roll_the_onset_is_clipped(fake_runner, fake_speak) -> None:
    said, rate = fake_speak("What time is it?")
    lst = listener(fake_runner, rate, preroll_ms=0)
    await feed(lst, np.concatenate([said, silence(300, rate)]), rate)
    heard = FakeAsr().transcribe(lst.utterance_audio())
    assert heard != "What time is it?" and heard.endswith("is it?")


async def test_speech_that_comes_back_after_speculate_resumes_the_same_utterance(fake_runner, fake_speak) -> None:
    first, rate = fake_speak("What is the")
    second, _ = fake_speak("capital")
    mic = np.concatenate([first, silence(250, rate), second[int(0.3 * rate):], silence(700, rate)])
    lst = listener(fake_runner, rate)
    heard = await feed(lst, mic, rate)
    assert [h.event for h in heard] == [Event.SPEECH_START, Event.SPECULATE, Event.RESUMED, Event.SPECULATE,
                                        Event.ENDPOINT]
    assert FakeAsr().transcribe(lst.utterance_audio()) == "What is the capital"


async def test_a_click_shorter_than_min_speech_is_no_utterance(fake_runner) -> None:
    lst = listener(fake_runner)
    click = np.full(16000 * 100 // 1000, 0.3, np.float32)  # 100 ms, loud
    assert await feed(lst, np.concatenate([silence(200), click, silence(800)]), 16000) == []
    assert not lst.in_speech


async def test_force_endpoint_ends_a_running_utterance_and_reports_whether_one_ran(fake_runner, fake_speak) -> None:
    said, rate = fake_speak("Turn on the light")
    lst = listener(fake_runner, rate)
    heard = await feed(lst, said, rate)
    assert [h.event for h in heard] == [Event.SPEECH_START] and lst.in_speech
    assert FakeAsr().transcribe(lst.utterance_audio()).startswith("Turn on the li")  # up to the last window
    assert lst.force_endpoint() is True and not lst.in_speech
    assert lst.force_endpoint() is False
