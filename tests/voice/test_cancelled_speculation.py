"""A speculative decode the speech went on after stops early and gives its worker to the turn's
decode (real Silero VAD and Moonshine, one ASR worker): the user pauses (the conversation decodes
speculatively), resumes while that decode is in its decoder loop, then ends. Asserted by the
order of the engine's calls and their decoder steps, never by time."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import numpy as np
import pytest

from firmware_protocol import AudioFormat, Transcript
from gateway.audio.pcm import resample
from gateway.config import parse_config
from gateway.engines.base import DecodeCancelled
from gateway.engines.fake import FakeTts
from gateway.engines.moonshine_ort import MoonshineOnnxAsr
from gateway.engines.runner import EngineRunner
from gateway.voice.conversation import Conversation
from gateway.voice.events import TurnEvents
from gateway.voice.wire import to_device
from tests.conftest import words
from tests.voice.scripted_brain import ScriptedBrain
from tests.voice.test_conversation import MIC, Device, answers, final, say, silence

pytestmark = [pytest.mark.models, pytest.mark.asyncio(loop_scope="session")]

ROOT = Path(__file__).resolve().parents[2]
HOLD_AT = 2  # the stale decode waits in its decoder loop, after this many steps, for its cancel token


class HeldMoonshine:
    """The real Moonshine, each call's start and end recorded in order (from the worker thread). The
    first call waits after HOLD_AT decoder steps until its cancel token is set (at most 15 s), so the
    user's resumed speech reaches the conversation while that decode is mid-way."""

    sample_rate = 16000
    thread_safe = True

    def __init__(self, asr: MoonshineOnnxAsr) -> None:
        self.asr = asr
        self.events: list[tuple[str, int, int]] = []  # (start / stopped / done, call, decoder steps so far)
        self.audio: list[np.ndarray] = []
        self.holding = threading.Event()  # the first call waits in its decoder loop

    def transcribe(self, audio: np.ndarray, cancel: threading.Event | None = None) -> str:
        n = len(self.audio)
        self.audio.append(audio)
        self.events.append(("start", n, self.asr.decoder_steps))
        run, steps = self.asr._dec.run, 0

        def held(names, feeds):  # noqa: ANN001, ANN202
            nonlocal steps
            steps += 1
            if steps == HOLD_AT + 1 and cancel is not None:
                self.holding.set()
                cancel.wait(15)
            return run(names, feeds)

        if n == 0:
            self.asr._dec.run = held
        try:
            text = self.asr.transcribe(audio, cancel=cancel)
        except DecodeCancelled:
            self.events.append(("stopped", n, self.asr.decoder_steps))
            raise
        finally:
            self.asr._dec.run = run
        self.events.append(("done", n, self.asr.decoder_steps))
        return text


def _trimmed(audio: np.ndarray) -> np.ndarray:
    """Without the voice's own leading and trailing silence (it varies run to run)."""
    loud = np.flatnonzero(np.abs(audio) > 0.02)
    return audio[loud[0]: loud[-1] + 1]


def _steps(asr: MoonshineOnnxAsr, audio: np.ndarray) -> tuple[str, int]:
    before = asr.decoder_steps
    return asr.transcribe(audio), asr.decoder_steps - before


async def test_a_speculative_decode_the_speech_went_on_after_frees_the_only_worker_early(runner, speak) -> None:
    if not isinstance(runner.asr, MoonshineOnnxAsr):
        pytest.skip(f"asr.engine is {type(runner.asr).__name__}, not Moonshine on onnxruntime")
    first, rate = speak("What will the weather be like")
    rest, _ = speak("in the kitchen tomorrow morning?")
    first, rest = _trimmed(resample(first, rate, MIC)), _trimmed(resample(rest, rate, MIC))
    held = HeldMoonshine(runner.asr)
    engines = EngineRunner(runner.vad, held, FakeTts(), asr_workers=1)  # type: ignore[arg-type]
    cfg = parse_config({"audio": {"prebuffer_ms": 5000}, "brain": {"speculate": False}}, ROOT)
    dev = Device()
    conv = Conversation("box-1", "test", cfg, engines, ScriptedBrain(answers), dev.send, AudioFormat(sample_rate=MIC),
                        AudioFormat(sample_rate=16000), TurnEvents([to_device(dev.send)]))
    try:
        # > 120 ms of the VAD's silence after its hangover on the voice's tail, < 500: decoded speculatively, not ended
        await say(conv, np.concatenate([silence(300), first, silence(350)]))
        assert await asyncio.to_thread(held.holding.wait, 30)
        await say(conv, np.concatenate([rest, silence(800)]))  # resumed (the stale decode is cancelled), ended
        await dev.until(final, timeout=60)
        await conv.close()
    finally:
        engines.close()
    heard = [m.text for m in dev.of(Transcript)]
    (s0, _, a0), (e0, _, b0), (s1, _, a1), (e1, _, b1) = held.events[:4]
    assert (s0, e0, s1, e1) == ("start", "stopped", "start", "done")  # one worker: the slot was held till it stopped
    assert b0 - a0 == HOLD_AT + 1  # the stale decode stopped after the step its cancel came in ...
    stale_text, stale_full = _steps(runner.asr, held.audio[0])
    assert stale_full > HOLD_AT + 3 and "weather" in words(stale_text)  # ... not after its whole decode
    turn_text, turn_full = _steps(runner.asr, held.audio[1])
    assert b1 - a1 == turn_full and heard == [turn_text]  # the turn's decode is the normal one
    assert {"weather", "kitchen"} <= set(words(turn_text))
    assert engines.asr_cancels.stopped == 1 and engines.asr_cancels.finished == 0
