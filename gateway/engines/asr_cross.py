"""A second opinion whose choice is made by both models (`asr.second_opinion_choice: cross`).

As gateway/engines/asr_second_opinion.py, the first engine (Moonshine) decodes every utterance,
and the second (Whisper tiny.en) decodes it too when the first is unsure of it (an empty or
looped transcript, or a mean token log-probability below `threshold`; `threshold` 0: always, a
full two-model ensemble). The choice differs: instead of comparing each model's score of its
own transcript (two scales that do not compare), both models score every candidate: the first
engine's finished beams (`asr.beam_size`) and the second's transcript(s), each text tokenized by
each model's own tokenizer and run through its decoder on the utterance's encoding (teacher
forcing: Moonshine's decoder over the text's tokens in one batch, Whisper's through
CTranslate2's `Whisper.align`). The kept candidate has the best
`weight x first's log-probability of it + (1 - weight) x second's`: by default (`by` "sum") each
model's log-probability of the whole text (the sum over its tokens: a weighted product of the two
models' probabilities of the sentence), or (`by` "mean") per token, the length-normalised score a
beam search ranks its own beams by. Candidates that differ
only in case and punctuation are scored once (the best-ranked spelling kept): the words are what
counts. A single candidate, or none, is kept without scoring.

The second engine (decode and scoring) runs one call at a time (a lock: Whisper on CTranslate2
says it is not thread safe); `decodes` and `second_opinions` count the calls (benchmarks, tests).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from typing import Literal

import numpy as np

from gateway.engines.asr_confidence import Hearing, ScoredTranscript, ScoresTexts, TextScore
from gateway.engines.asr_second_opinion import SecondOpinionAsr

_NOT_A_WORD = re.compile(r"[^\w\s']+")
ScoreBy = Literal["sum", "mean"]  # a text's log-probability as a whole, or per token


def words_of(text: str) -> str:
    """The text as the words it says: case and punctuation dropped ("Turn it off." -> "turn it off")."""
    return " ".join(_NOT_A_WORD.sub(" ", text.lower()).split())


def candidates(*hearings: Hearing) -> list[ScoredTranscript]:
    """Every non-empty candidate of the hearings in order, each wording once (its first spelling)."""
    seen: set[str] = set()
    found: list[ScoredTranscript] = []
    for hearing in hearings:
        for heard in hearing.candidates:
            key = words_of(heard.text)
            if key and key not in seen:
                seen.add(key)
                found.append(heard)
    return found


def choose(first: Hearing, second: Hearing, weight: float, by: ScoreBy = "sum") -> ScoredTranscript:
    """The candidate of both hearings with the best weighted sum of the two models' scores of it
    (`mean_logprob`: the first engine's, per token); the first engine's best when no one has any words."""
    found = candidates(first, second)
    if not found:
        return first.candidates[0]
    if len(found) == 1:
        return found[0]
    texts = [c.text for c in found]
    ones, twos = first.score(texts), second.score(texts)
    value = (lambda s: s.logprob) if by == "sum" else (lambda s: s.mean)
    combined = [weight * value(a) + (1.0 - weight) * value(b) for a, b in zip(ones, twos)]
    best = int(np.argmax(combined))
    return ScoredTranscript(found[best].text, ones[best].mean, found[best].looped)


class CrossScoredAsr(SecondOpinionAsr):
    """AsrEngine: `first`, and when it is unsure, `second` too, the candidate both score best kept
    (when to ask and the counts: SecondOpinionAsr's)."""

    def __init__(self, first: ScoresTexts, second: ScoresTexts, threshold: float, weight: float,
                 by: ScoreBy = "sum") -> None:
        if not 0.0 <= weight <= 1.0:
            raise ValueError(f"the first engine's weight must be within 0..1, not {weight}")
        super().__init__(first, second, threshold)
        self._hears_first, self._hears_second = first, second
        self._weight, self._by = weight, by

    def transcribe_scored(self, audio: np.ndarray, cancel: threading.Event | None = None) -> ScoredTranscript:
        first = self._hears_first.hear(audio, cancel)
        if not self._counted(first.candidates[0]):
            return first.candidates[0]
        with self._second_lock:
            second = self._hears_second.hear(audio, cancel)
        return choose(first, self._one_at_a_time(second), self._weight, self._by)

    def _one_at_a_time(self, hearing: Hearing) -> Hearing:
        """`hearing` with its scorer behind the second engine's lock."""
        def score(texts: Sequence[str]) -> list[TextScore]:
            with self._second_lock:
                return hearing.score(texts)
        return Hearing(hearing.candidates, score)
