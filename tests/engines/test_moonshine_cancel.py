"""A cancelled Moonshine decode (its `cancel` token set: nobody waits for the text) stops at its
next decoder step, and the runner sets the token when the awaiting coroutine is cancelled, so the
worker is free for the next call after fewer steps. Counted in decoder steps and by the order of
the calls, never by time; an unset token changes nothing."""

from __future__ import annotations

import asyncio
import threading

import numpy as np
import pytest

from gateway.config import GatewayConfig
from gateway.engines.base import DecodeCancelled
from gateway.engines.fake import FakeTts, FakeVad
from gateway.engines.moonshine_ort import MoonshineOnnxAsr
from gateway.engines.runner import EngineRunner
from gateway.engines.store import ModelStore

pytestmark = pytest.mark.models

QUESTION = "Could you please tell me what the weather will be like in the kitchen tomorrow morning?"


@pytest.fixture(scope="module")
def asr(prepared_cfg: GatewayConfig) -> MoonshineOnnxAsr:
    files = ModelStore(prepared_cfg).files_of("moonshine-base-en")
    return MoonshineOnnxAsr(files["encoder"], files.get("decoder_float", files["decoder"]), files["tokens"])


def _steps_of(asr: MoonshineOnnxAsr, audio: np.ndarray, cancel: threading.Event | None = None) -> tuple[str, int]:
    before = asr.decoder_steps
    return asr.transcribe(audio, cancel=cancel), asr.decoder_steps - before


class _SetAtStep:
    """Wraps the decoder session: sets `token` while the decoder runs its `at`-th step (as the
    runner does from the event loop while a thread decodes), and counts the steps."""

    def __init__(self, asr: MoonshineOnnxAsr, token: threading.Event, at: int) -> None:
        self.asr, self.token, self.at, self.steps = asr, token, at, 0
        self._run = asr._dec.run

    def __enter__(self) -> "_SetAtStep":
        def run(names, feeds):  # noqa: ANN001, ANN202
            self.steps += 1
            if self.steps == self.at:
                self.token.set()
            return self._run(names, feeds)

        self.asr._dec.run = run
        return self

    def __exit__(self, *exc: object) -> None:
        self.asr._dec.run = self._run


def test_a_decode_cancelled_mid_way_stops_at_its_next_step(asr: MoonshineOnnxAsr, speech16k) -> None:
    audio = speech16k(QUESTION)
    full_text, full_steps = _steps_of(asr, audio)
    assert "kitchen" in full_text.lower() and full_steps >= 12
    token, before = threading.Event(), asr.decoder_steps
    with _SetAtStep(asr, token, at=3) as watched, pytest.raises(DecodeCancelled) as stopped:
        asr.transcribe(audio, cancel=token)
    assert stopped.value.steps == 3 and watched.steps == 3  # not one step after the one it was set in
    assert asr.decoder_steps - before == 3 < full_steps  # the counter counts a stopped decode's steps


def test_a_token_set_before_the_call_runs_no_decoder_step(asr: MoonshineOnnxAsr, speech16k) -> None:
    token = threading.Event()
    token.set()
    before = asr.decoder_steps
    with _SetAtStep(asr, threading.Event(), at=0) as watched, pytest.raises(DecodeCancelled) as stopped:
        asr.transcribe(speech16k("What time is it?"), cancel=token)
    assert stopped.value.steps == 0 and watched.steps == 0 and asr.decoder_steps == before


def test_an_unset_token_leaves_the_transcripts_and_steps_unchanged(asr: MoonshineOnnxAsr, speech16k) -> None:
    for text in ("What time is it?", "Turn on the lights in the living room.", QUESTION):
        audio = speech16k(text)
        assert _steps_of(asr, audio, threading.Event()) == _steps_of(asr, audio)


class _Calls:
    """The real engine behind the runner, each call's start and end in order (from the threads)."""

    sample_rate = 16000
    thread_safe = True

    def __init__(self, asr: MoonshineOnnxAsr) -> None:
        self.asr = asr
        self.events: list[tuple[str, int, int]] = []  # (what, call, decoder steps so far)

    def transcribe(self, audio: np.ndarray, cancel: threading.Event | None = None) -> str:
        n = sum(1 for e in self.events if e[0] == "start")
        self.events.append(("start", n, self.asr.decoder_steps))
        try:
            text = self.asr.transcribe(audio, cancel=cancel)
        except DecodeCancelled:
            self.events.append(("stopped", n, self.asr.decoder_steps))
            raise
        self.events.append(("done", n, self.asr.decoder_steps))
        return text


@pytest.mark.asyncio(loop_scope="session")
async def test_a_cancelled_call_frees_its_only_worker_after_fewer_steps_for_the_next_call(
        asr: MoonshineOnnxAsr, speech16k) -> None:
    stale, turn = speech16k(QUESTION), speech16k("What time is it?")
    _, stale_full = _steps_of(asr, stale)
    _, turn_full = _steps_of(asr, turn)
    calls = _Calls(asr)
    runner = EngineRunner(FakeVad(), calls, FakeTts(), asr_workers=1)  # type: ignore[arg-type]
    stepping = threading.Event()
    try:
        with _SetAtStep(asr, stepping, at=2):  # the stale decode is in its decoder loop
            first = asyncio.create_task(runner.transcribe(stale, who="box-1"))
            await asyncio.wait_for(asyncio.to_thread(stepping.wait, 30), 35)
            second = asyncio.create_task(runner.transcribe(turn, who="box-1"))  # waits for the only worker
            await asyncio.sleep(0)
            first.cancel()
            heard = await asyncio.wait_for(second, 60)
        with pytest.raises(asyncio.CancelledError):
            await first
    finally:
        runner.close()
    assert heard.lower().startswith("what time is it")
    (s0, _, a0), (e0, _, b0), (s1, _, a1), (e1, _, b1) = calls.events
    assert (s0, e0, s1, e1) == ("start", "stopped", "start", "done")  # one at a time: the slot was held
    assert 2 <= b0 - a0 < stale_full  # the stale decode stopped early ...
    assert b1 - a1 == turn_full  # ... and the next call ran its whole decode
    c = runner.asr_cancels
    assert (c.abandoned, c.stopped, c.finished, c.stopped_steps) == (1, 1, 0, b0 - a0)
    assert runner.asr_admission.busy == 0
