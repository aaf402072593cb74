"""One device's expression packets for a spoken sentence, per its Hello capabilities.

VISEMES -> Visemes (0x30); MOUTH -> Mouth (0x31); ACTION -> Action (0x32, when a rule matched)
and Sentiment (0x33); SERVO -> ServoKeyframes (0x34, when the servo map has a motion for the
action and it may interrupt the running one). A device that announced none of them gets nothing.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from firmware_protocol import Capability, Message, Mouth, Sentiment, Visemes
from firmware_protocol import Action as ActionMessage
from gateway.brain.contract import Sentence
from gateway.engines.base import SynthChunk
from gateway.expression.mouth import levels_from_audio, levels_from_runs, to_bytes
from gateway.expression.sentence import Expression, SentenceExpression

MAX_RUNS = 255
MAX_MS = 0xFFFF

Observer = Callable[[SentenceExpression, int, list[SynthChunk]], None]


def viseme_messages(expr: SentenceExpression, stream_id: int) -> list[Message]:
    records = [(r.viseme, min(r.start_ms, MAX_MS), min(r.duration_ms, MAX_MS), round(r.open * 255))
               for r in expr.runs]
    parts = [records[i : i + MAX_RUNS] for i in range(0, len(records), MAX_RUNS)] or [[]]
    return [Visemes(stream_id=stream_id, visemes=tuple(p)) for p in parts]


def mouth_message(expr: SentenceExpression, stream_id: int, chunks: list[SynthChunk], frame_ms: int = 0) -> Message:
    """Mouth values at `frame_ms` (0: the analysis' frame length)."""
    if not frame_ms or frame_ms == expr.frame_ms:
        return Mouth(stream_id=stream_id, frame_ms=expr.frame_ms, values=to_bytes(list(expr.levels)))
    if expr.timed:
        levels = levels_from_runs(list(expr.runs), frame_ms)
    else:
        pcm = np.concatenate([c.pcm for c in chunks]).astype(np.float32) / 32768.0
        levels = levels_from_audio(pcm, chunks[0].sample_rate, frame_ms)
    return Mouth(stream_id=stream_id, frame_ms=frame_ms, values=to_bytes(levels))


def action_messages(expr: SentenceExpression, stream_id: int) -> list[Message]:
    out: list[Message] = []
    if expr.action is not None:
        a = expr.action
        out.append(ActionMessage(stream_id=stream_id, code=a.code, behavior=a.behavior, affect=a.affect,
                                 intensity=round(a.intensity * 100), priority=a.priority))
    out.append(Sentiment(stream_id=stream_id, tenths=round(expr.sentiment * 10)))
    return out


class DeviceExpression:
    """The sentence hook of one device session (the speaker calls it with each synthesized sentence)."""

    def __init__(self, expression: Expression, capabilities: int, servo: object | None = None,
                 observers: tuple[Observer, ...] = ()) -> None:
        self._expression = expression
        self._caps = Capability(capabilities)
        self._servo = servo  # gateway.expression.servo.ServoPlayer, when the device drives servos
        self._observers = observers
        self.mouth_frame_ms = 0  # 0: the gateway's default (ExpressionSetup sets it)

    @property
    def wants_anything(self) -> bool:
        wanted = Capability.VISEMES | Capability.MOUTH | Capability.ACTION | Capability.SERVO
        return bool(self._caps & wanted) or bool(self._observers)

    def __call__(self, sentence: Sentence, chunks: list[SynthChunk], stream_id: int) -> list[Message]:
        expr = self._expression.analyse(sentence, chunks)
        for observe in self._observers:
            observe(expr, stream_id, chunks)
        out: list[Message] = []
        if self._caps & Capability.ACTION:
            out += action_messages(expr, stream_id)
        if self._caps & Capability.VISEMES:
            out += viseme_messages(expr, stream_id)
        if self._caps & Capability.MOUTH:
            out.append(mouth_message(expr, stream_id, chunks, self.mouth_frame_ms))
        if self._caps & Capability.SERVO and self._servo is not None:
            keyframes = self._servo.on_sentence(expr, stream_id)  # type: ignore[attr-defined]
            if keyframes is not None:
                out.append(keyframes)
        return out
