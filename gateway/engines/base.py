"""Engine interfaces the core uses. Implementations live next to this file and are the only
modules that import sherpa-onnx, onnxruntime or piper.

All engine methods are *blocking* and may be slow: the core calls them through
`gateway.engines.runner.EngineRunner`, which runs each engine on a pool of executor threads.
An ASR or TTS engine that several threads may call at once says so with `thread_safe = True`
(the runner then shares it between its workers); one that does not runs one call at a time.

An ASR call gets a `cancel` token (a `threading.Event`) that the runner sets when nobody waits for
the result any more (a speculative decode the speech went on after, a barge-in, a close): an
engine that decodes step by step in Python checks it between steps and raises `DecodeCancelled`
(the runner swallows it), so the worker is free for the next turn sooner; one that cannot stop
inside its runtime's call checks it where it can and otherwise ignores it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np


class VadEngine(Protocol):
    """Voice activity detection on fixed-size windows of 16 kHz mono float32 audio."""

    sample_rate: int  # always 16000
    window_samples: int  # e.g. 512 for Silero

    def is_speech(self, window: np.ndarray) -> bool:
        """True when this window (exactly `window_samples` float32 samples) holds speech."""
        ...

    def reset(self) -> None:
        """Forget the recurrent state (call between utterances/sessions)."""
        ...

    def clone(self) -> "VadEngine":
        """A fresh detector sharing the loaded model where possible (one per device session)."""
        ...


class DecodeCancelled(Exception):
    """An ASR call saw its `cancel` token set and stopped early: nobody uses its result."""

    def __init__(self, steps: int = 0) -> None:
        super().__init__(f"decode cancelled after {steps} decoder steps")
        self.steps = steps  # decoder steps run before it stopped (0: before the first, or not counted)


class AsrEngine(Protocol):
    """Offline (whole-utterance) speech recognition on 16 kHz mono float32 audio."""

    sample_rate: int

    def transcribe(self, audio: np.ndarray, cancel: threading.Event | None = None) -> str:
        """Return the text of the utterance (stripped, may be empty). When `cancel` is set during
        the call, the engine may stop early and raise `DecodeCancelled` (or finish normally)."""
        ...


@runtime_checkable
class CountsDecoderSteps(Protocol):
    """An ASR engine that counts the decoder steps all its calls ran (benchmarks, tests)."""

    decoder_steps: int


@runtime_checkable
class CountsSecondOpinions(Protocol):
    """An ASR engine of two models that counts its utterances and how many the second model
    decoded too (asr.second_opinion: benchmarks, tests)."""

    decodes: int
    second_opinions: int


@dataclass(frozen=True)
class SynthChunk:
    """A piece of synthesized speech: mono int16 PCM at `sample_rate`.

    `phonemes`, when the engine knows them, are the chunk's (IPA phoneme, sample count) pairs in
    order; their counts add up to the chunk's length. None when the engine gives no timings.
    """

    pcm: np.ndarray  # int16
    sample_rate: int
    phonemes: tuple[tuple[str, int], ...] | None = None


@dataclass(frozen=True)
class SpeechPiece:
    """Which part of a sentence's synthesized audio a sentence hook is given (the Speaker synthesizes
    a long first sentence in pieces, gateway/voice/pieces.py; most sentences are one piece)."""

    index: int  # 0: the first piece, whose messages go before the stream's AudioStart
    offset_ms: float  # where this piece's audio starts in the sentence's stream
    last: bool  # the sentence's audio is complete with this piece
    sentence_chunks: tuple[SynthChunk, ...]  # every chunk of the sentence so far, this piece's included

    @classmethod
    def whole(cls, chunks: list[SynthChunk]) -> SpeechPiece:
        return cls(0, 0.0, True, tuple(chunks))


class TtsEngine(Protocol):
    sample_rate: int

    def synthesize(self, text: str) -> Iterator[SynthChunk]:
        """Yield audio for `text` as soon as pieces are ready (at least one chunk for non-empty text)."""
        ...
