"""One device's expression packets for a spoken sentence, per its Hello capabilities.

VISEMES -> Visemes (0x30); MOUTH -> Mouth (0x31); ACTION -> Action (0x32, when a rule matched)
and Sentiment (0x33); SERVO -> ServoKeyframes (0x34, when the servo map has a motion for the
action and it may interrupt the running one). A device that announced none of them gets nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np

from firmware_protocol import Capability, Message, Mouth, Sentiment, Visemes
from firmware_protocol import Action as ActionMessage
from gateway.brain.contract import Sentence
from gateway.engines.base import SpeechPiece, SynthChunk
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
        self._mouth_sent = 0  # Mouth frames already sent of the sentence being streamed in pieces

    @property
    def wants_anything(self) -> bool:
        wanted = Capability.VISEMES | Capability.MOUTH | Capability.ACTION | Capability.SERVO
        return bool(self._caps & wanted) or bool(self._observers)

    def __call__(self, sentence: Sentence, chunks: list[SynthChunk], stream_id: int,
                 piece: SpeechPiece | None = None) -> list[Message]:
        """The packets for one piece of a sentence's audio (`piece` None: the whole sentence).

        The first piece gets everything that goes before the stream's AudioStart (action,
        sentiment, servo, its visemes and mouth); a later piece its visemes shifted to where its
        audio starts, and the mouth frames beyond those already sent, to be appended. The
        observers see the whole sentence once, with its last piece."""
        piece = piece or SpeechPiece.whole(chunks)
        expr = self._expression.analyse(sentence, chunks)
        whole = expr if piece.index == 0 and piece.last else None
        if piece.last and self._observers:
            whole = whole or self._expression.analyse(sentence, list(piece.sentence_chunks))
            for observe in self._observers:
                observe(whole, stream_id, list(piece.sentence_chunks))
        first = piece.index == 0
        out: list[Message] = []
        if first and self._caps & Capability.ACTION:
            out += action_messages(expr, stream_id)
        if self._caps & Capability.VISEMES:
            out += viseme_messages(shifted(expr, piece.offset_ms) if piece.offset_ms else expr, stream_id)
        if self._caps & Capability.MOUTH:
            out.append(self._mouth(sentence, expr, piece, stream_id))
        if self._caps & Capability.SERVO and self._servo is not None:
            if first:
                keyframes = self._servo.on_sentence(expr, stream_id)  # type: ignore[attr-defined]
                if keyframes is not None:
                    out.append(keyframes)
            else:
                self._servo.more_audio(expr.audio_ms)  # type: ignore[attr-defined]
        return out

    def _mouth(self, sentence: Sentence, expr: SentenceExpression, piece: SpeechPiece, stream_id: int) -> Message:
        """The first piece's Mouth, or the frames of the sentence so far beyond those already sent."""
        chunks = list(piece.sentence_chunks)
        so_far = expr if piece.index == 0 else self._expression.analyse(sentence, chunks)
        whole = mouth_message(so_far, stream_id, chunks, self.mouth_frame_ms)
        assert isinstance(whole, Mouth)
        sent = 0 if piece.index == 0 else self._mouth_sent
        self._mouth_sent = len(whole.values)
        return Mouth(stream_id=stream_id, frame_ms=whole.frame_ms, values=whole.values[sent:])


def shifted(expr: SentenceExpression, offset_ms: float) -> SentenceExpression:
    """`expr` with its viseme runs moved `offset_ms` later (a later piece of its sentence's stream)."""
    runs = tuple(replace(r, start_ms=r.start_ms + round(offset_ms)) for r in expr.runs)
    return replace(expr, runs=runs)
