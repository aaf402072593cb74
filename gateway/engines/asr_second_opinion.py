"""A second ASR engine's opinion when the first is unsure (`asr.second_opinion`).

Every utterance is decoded by the first engine (Moonshine). When that transcript is empty, was
cut out of a loop (the decoder repeating itself, typical in noise), or its mean token
log-probability is below `threshold`, the same audio is decoded again by the second engine
(Whisper tiny.en), and the transcript the engines are surer of is kept (the higher mean token
log-probability; an empty one only when both are). A confident first transcript costs nothing
more; an unsure one costs the second decode too. `decodes` and `second_opinions` count the calls
(benchmarks, tests).

`asr.second_opinion_choice: cross` (gateway/engines/asr_cross.py) keeps instead the candidate both
engines score best.

The second engine runs one call at a time (a lock: Whisper on CTranslate2 says it is not thread
safe), the first as it allows; a cancelled call stops in whichever engine it is in.
"""

from __future__ import annotations

import threading

import numpy as np

from gateway.engines.asr_confidence import ScoredTranscript, ScoresTranscripts
from gateway.engines.base import CountsDecoderSteps


class SecondOpinionAsr:
    """AsrEngine: `first`, and `second` when `first` is unsure of an utterance."""

    def __init__(self, first: ScoresTranscripts, second: ScoresTranscripts, threshold: float) -> None:
        if first.sample_rate != second.sample_rate:
            raise ValueError(f"the engines' sample rates differ: {first.sample_rate} and {second.sample_rate}")
        self.sample_rate = first.sample_rate
        self.thread_safe = True  # the second engine is behind a lock; the first engine's own calls are per call
        self._first, self._second, self._threshold = first, second, threshold
        self._second_lock = threading.Lock()
        self._count_lock = threading.Lock()
        self.decodes = 0  # utterances decoded
        self.second_opinions = 0  # of those, how many the second engine decoded too

    @property
    def decoder_steps(self) -> int | None:
        """The first engine's decoder steps, when it counts them (CountsDecoderSteps)."""
        return self._first.decoder_steps if isinstance(self._first, CountsDecoderSteps) else None

    def unsure(self, heard: ScoredTranscript) -> bool:
        return not heard.text or heard.looped or heard.mean_logprob < self._threshold

    def _counted(self, heard: ScoredTranscript) -> bool:
        """Count the utterance the first engine heard; True when it gets a second opinion."""
        unsure = self.unsure(heard)
        with self._count_lock:
            self.decodes += 1
            self.second_opinions += unsure
        return unsure

    def transcribe(self, audio: np.ndarray, cancel: threading.Event | None = None) -> str:
        return self.transcribe_scored(audio, cancel).text

    def transcribe_scored(self, audio: np.ndarray, cancel: threading.Event | None = None) -> ScoredTranscript:
        heard = self._first.transcribe_scored(audio, cancel)
        if not self._counted(heard):
            return heard
        with self._second_lock:
            other = self._second.transcribe_scored(audio, cancel)
        if not other.text:
            return heard
        if not heard.text:
            return other
        return other if other.mean_logprob > heard.mean_logprob else heard
