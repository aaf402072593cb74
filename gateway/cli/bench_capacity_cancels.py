"""The thrown-away ASR decodes and TTS pieces of a `gateway bench-capacity` round, what they cost, and
what stopping the decodes early saved.

A speculative decode starts when trailing silence begins; when the speech goes on (or a barge-in,
a close) its caller stops waiting and the runner sets its cancel token (gateway/engines/runner.py):
Moonshine stops at its next decoder step. `StoppedDecodes` wraps the ASR engine for the bench and
keeps the audio of every decode that stopped early; after the round (outside its CPU figures)
each is decoded again to its end, so `decoder_steps_saved` is the steps the whole decodes would
have run minus the steps they did run. Engines without a step counter report no step figures.
A speculative reply's first piece (`Speaker.prepare`) is synthesized while the endpoint silence is
counted; when the speech goes on it is thrown away, and a TTS call, once on its thread, runs to its
end: the runner counts those calls and the worker CPU of both kinds (`Cancels.wasted_cpu_s`, the
worker thread only: onnxruntime's intra-op threads of a 2-thread call add to it).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np

from gateway.engines.base import AsrEngine, CountsDecoderSteps, DecodeCancelled
from gateway.engines.runner import EngineRunner


class StoppedDecodes:
    """AsrEngine: `inner`, with the calls counted and the audio of the early-stopped ones kept."""

    def __init__(self, inner: AsrEngine) -> None:
        self.inner = inner
        self.sample_rate = inner.sample_rate
        self.calls = 0
        self.stopped: list[tuple[np.ndarray, int]] = []  # (audio, decoder steps it ran)

    def transcribe(self, audio: np.ndarray, cancel: threading.Event | None = None) -> str:
        self.calls += 1
        try:
            return self.inner.transcribe(audio, cancel=cancel)
        except DecodeCancelled as stopped:
            self.stopped.append((audio, stopped.steps))
            raise

    def steps(self) -> int | None:
        return self.inner.decoder_steps if isinstance(self.inner, CountsDecoderSteps) else None


@dataclass(frozen=True)
class Mark:
    """The counters at the start of a round."""

    calls: int
    abandoned: int
    finished: int
    stopped: int
    steps: int | None
    asr_wasted_s: float
    tts_calls: int
    tts_abandoned: int
    tts_finished: int
    tts_wasted_s: float


def mark(runner: EngineRunner, asr: StoppedDecodes) -> Mark:
    c, t = runner.asr_cancels, runner.tts_cancels
    return Mark(asr.calls, c.abandoned, c.finished, len(asr.stopped), asr.steps(), c.wasted_cpu_s,
                t.calls, t.abandoned, t.finished, t.wasted_cpu_s)


def cancels_row(runner: EngineRunner, asr: StoppedDecodes, start: Mark) -> dict:
    """The round's ASR calls, the thrown-away ones and the decoder steps saved (re-decodes the
    stopped ones: call it after the round's figures are taken)."""
    now = mark(runner, asr)
    stopped, finished = now.stopped - start.stopped, now.finished - start.finished
    waiting = now.abandoned - start.abandoned - stopped - finished  # cancelled before a worker took them
    row: dict = {"asr_decodes": now.calls - start.calls + waiting, "asr_thrown_away": now.abandoned - start.abandoned,
                 "asr_stopped_early": stopped, "asr_ran_to_end_unused": finished, "asr_dropped_waiting": waiting,
                 "asr_wasted_cpu_s": round(now.asr_wasted_s - start.asr_wasted_s, 3),
                 "tts_calls": now.tts_calls - start.tts_calls, "tts_thrown_away": now.tts_abandoned - start.tts_abandoned,
                 "tts_ran_unused": now.tts_finished - start.tts_finished,
                 "tts_wasted_cpu_s": round(now.tts_wasted_s - start.tts_wasted_s, 3),
                 "decoder_steps": None, "decoder_steps_saved": None}
    if now.steps is None or start.steps is None:
        return row
    row["decoder_steps"] = now.steps - start.steps
    saved = 0
    for audio, ran in asr.stopped[start.stopped:now.stopped]:
        before = asr.steps() or 0
        asr.inner.transcribe(audio)
        saved += (asr.steps() or 0) - before - ran
    row["decoder_steps_saved"] = saved
    return row


def cancels_line(r: dict) -> str:
    line = (f"{r['boxes']:>3} ASR decodes thrown away: {r['asr_thrown_away']} of {r['asr_decodes']} "
            f"({r['asr_stopped_early']} stopped early, {r['asr_ran_to_end_unused']} ran to their end, "
            f"{r['asr_dropped_waiting']} before a worker took them)")
    if r["decoder_steps"] is not None:
        line += f"; decoder steps run {r['decoder_steps']}, saved by stopping {r['decoder_steps_saved']}"
    if "tts_calls" in r:
        line += (f"; their worker CPU {r['asr_wasted_cpu_s']:.2f} s\n{r['boxes']:>3} TTS calls thrown away: "
                 f"{r['tts_thrown_away']} of {r['tts_calls']} ({r['tts_ran_unused']} ran to their end unused), "
                 f"their worker CPU {r['tts_wasted_cpu_s']:.2f} s")
    return line
