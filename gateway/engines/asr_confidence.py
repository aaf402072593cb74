"""How sure an ASR engine is of a transcript: the text with its mean token log-probability.

An engine that can say so (Moonshine on onnxruntime, Whisper on CTranslate2) implements
`ScoresTranscripts`; the second-opinion engine (gateway/engines/asr_second_opinion.py) uses it to
decide when a transcript needs another engine's decode, and which of the two to keep.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
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
