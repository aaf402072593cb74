"""`gateway bench-capacity`'s count of thrown-away decodes and of the decoder steps their early stop
saved. Unit test of the counting: a step-counting stand-in engine that decodes one step per 100
samples and stops on its cancel token, as Moonshine does (tests/engines/test_moonshine_cancel.py)."""

from __future__ import annotations

import asyncio
import threading

import numpy as np
import pytest

from gateway.cli.bench_capacity_cancels import StoppedDecodes, cancels_line, cancels_row, mark
from gateway.engines.base import DecodeCancelled
from gateway.engines.fake import FakeTts, FakeVad
from gateway.engines.runner import EngineRunner


class Stepper:
    """One decoder step per 100 samples; the first call waits after its third step until `go`."""

    sample_rate = 16000
    thread_safe = True

    def __init__(self) -> None:
        self.decoder_steps = 0
        self.calls = 0
        self.at_three, self.go = threading.Event(), threading.Event()

    def transcribe(self, audio: np.ndarray, cancel: threading.Event | None = None) -> str:
        self.calls += 1
        first = self.calls == 1
        for step in range(audio.size // 100):
            if cancel is not None and cancel.is_set():
                raise DecodeCancelled(step)
            self.decoder_steps += 1
            if first and step == 2:
                self.at_three.set()
                self.go.wait(10)
        return "text"


@pytest.mark.asyncio(loop_scope="session")
async def test_a_stopped_decode_is_counted_with_the_steps_its_whole_decode_would_have_run() -> None:
    engine = Stepper()
    runner = EngineRunner(FakeVad(), engine, FakeTts(), asr_workers=1)  # type: ignore[arg-type]
    asr = StoppedDecodes(runner.asr)
    runner.asr = asr
    try:
        start = mark(runner, asr)
        stale = asyncio.create_task(runner.transcribe(np.zeros(2000, np.float32)))  # 20 steps in full
        await asyncio.wait_for(asyncio.to_thread(engine.at_three.wait, 10), 15)
        waiting = asyncio.create_task(runner.transcribe(np.zeros(500, np.float32)))  # never gets a worker
        await asyncio.sleep(0)
        stale.cancel()
        waiting.cancel()
        await asyncio.gather(stale, waiting, return_exceptions=True)  # their tokens are set
        engine.go.set()
        assert await runner.transcribe(np.zeros(700, np.float32)) == "text"  # 7 steps
        row = cancels_row(runner, asr, start)
    finally:
        runner.close()
    assert row.pop("asr_wasted_cpu_s") >= 0.0  # the stopped decode's worker CPU (a few steps: ~0)
    assert row == {"asr_decodes": 3, "asr_thrown_away": 2, "asr_stopped_early": 1, "asr_ran_to_end_unused": 0,
                   "asr_dropped_waiting": 1, "decoder_steps": 3 + 7, "decoder_steps_saved": 20 - 3,
                   "tts_calls": 0, "tts_thrown_away": 0, "tts_ran_unused": 0, "tts_wasted_cpu_s": 0.0}
    assert cancels_line({"boxes": 8, **row, "asr_wasted_cpu_s": 0.0}) == (
        "  8 ASR decodes thrown away: 2 of 3 (1 stopped early, 0 ran to their end, 1 before a worker took them); "
        "decoder steps run 10, saved by stopping 17; their worker CPU 0.00 s\n"
        "  8 TTS calls thrown away: 0 of 0 (0 ran to their end unused), their worker CPU 0.00 s")


class HeldTts(FakeTts):
    """The first call spins on its thread until `go` (so it takes CPU), the others return at once."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0
        self.running, self.go = threading.Event(), threading.Event()

    def synthesize(self, text: str):  # type: ignore[no-untyped-def]
        self.calls += 1
        if self.calls == 1:
            self.running.set()
            while not self.go.is_set():
                sum(range(1000))  # busy: its worker's CPU is what the thrown-away piece cost
        yield from super().synthesize(text)


@pytest.mark.asyncio(loop_scope="session")
async def test_a_cancelled_synthesis_is_counted_with_the_worker_cpu_it_cost_once_its_thread_ran() -> None:
    tts = HeldTts()
    runner = EngineRunner(FakeVad(), Stepper(), tts, tts_workers=1)  # type: ignore[arg-type]
    asr = StoppedDecodes(runner.asr)
    try:
        start = mark(runner, asr)
        running = asyncio.create_task(runner.synthesize("Hello there."))  # runs on the only worker
        await asyncio.wait_for(asyncio.to_thread(tts.running.wait, 10), 15)
        waiting = asyncio.create_task(runner.synthesize("Never synthesized."))  # never gets the worker
        await asyncio.sleep(0.05)
        running.cancel()
        waiting.cancel()
        await asyncio.gather(running, waiting, return_exceptions=True)
        tts.go.set()
        assert await runner.synthesize("Kept.")  # the worker is free again once the first call is done
        row = cancels_row(runner, asr, start)
    finally:
        runner.close()
    assert (row["tts_calls"], row["tts_thrown_away"], row["tts_ran_unused"]) == (3, 2, 1)
    assert tts.calls == 2  # the waiting call never reached the engine
    assert row["tts_wasted_cpu_s"] > 0.0  # the running one's spin, counted when its thread returned
    assert runner.tts_cancels.finished == 1 and runner.tts_cancels.stopped == 0
