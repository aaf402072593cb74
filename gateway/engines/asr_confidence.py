"""How sure an ASR engine is of a transcript: the text with its mean token log-probability.

An engine that can say so (Moonshine on onnxruntime, Whisper on CTranslate2) implements
`ScoresTranscripts`; the second-opinion engine (gateway/engines/asr_second_opinion.py) uses it to
decide when a transcript needs another engine's decode, and which of the two to keep. An engine
that can also score any text it is given for the audio it heard (teacher forcing: its decoder
run over that text's tokens) implements `ScoresTexts`: the cross-scored second opinion
(gateway/engines/asr_cross.py) has each model score every candidate transcript.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from collections.abc import Callable, Sequence
from typing import Protocol

import numpy as np


@dataclass(frozen=True)
class ScoredTranscript:
    text: str  # as AsrEngine.transcribe returns it (stripped, may be empty)
    mean_logprob: float  # the decoder's mean log-probability per output token (EOS included); 0.0: none decoded
    looped: bool = False  # the decoder was repeating itself and was cut to one copy (decode_loop.py)


class ScoresTranscripts(Protocol):
    """An AsrEngine that can also say how sure it is of its transcript."""

    sample_rate: int

    def transcribe(self, audio: np.ndarray, cancel: threading.Event | None = None) -> str: ...

    def transcribe_scored(self, audio: np.ndarray, cancel: threading.Event | None = None) -> ScoredTranscript:
        """As `transcribe`, with the decoder's confidence."""
        ...


@dataclass(frozen=True)
class TextScore:
    """How likely a model finds a text for an utterance: its tokens' summed log-probability."""

    logprob: float  # natural log, the sum over the text's tokens (the end token included where scored)
    tokens: int  # how many tokens that sum is over (0: an empty text, not scored)

    @property
    def mean(self) -> float:
        return self.logprob / self.tokens if self.tokens else 0.0


@dataclass(frozen=True)
class Hearing:
    """One utterance as an engine heard it: its own transcripts, and its scorer of any text on it."""

    candidates: tuple[ScoredTranscript, ...]  # the engine's own transcripts, best first (greedy: one)
    scorer: Callable[[Sequence[str]], list[TextScore]]  # texts -> how likely each is

    def score(self, texts: Sequence[str]) -> list[TextScore]:
        """How likely this engine finds each text for this audio (teacher forcing), tokenized by the
        engine's own tokenizer (EOS included where the engine scores it); "" scores TextScore(0, 0)."""
        return self.scorer(texts)


class ScoresTexts(ScoresTranscripts, Protocol):
    """A ScoresTranscripts engine that can also keep an utterance's encoding to score any text on it."""

    def hear(self, audio: np.ndarray, cancel: threading.Event | None = None) -> Hearing:
        """Decode `audio` (as transcribe_scored) and keep its encoding for `Hearing.score`."""
        ...
