"""What one spoken sentence expresses: action, sentiment, viseme track and mouth levels.

`Expression.analyse` runs once per synthesized `Sentence` (before its audio is sent), whatever
the devices want: the keyword rules and the lexicon read its speech; when it has hints (an LLM's
`[happy]` or leading emoji), `gateway.expression.hints` decides the action and/or sentiment they
name;
`gateway.expression.device` turns the result into each device's packets and `gateway.screens`
into Fay's screen message. Costs well under a millisecond per sentence.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from gateway.engines.base import SynthChunk
from gateway.expression.hints import Hinted, HintMap
from gateway.expression.mouth import levels_from_audio, levels_from_runs
from gateway.expression.rules import Action, ActionRules
from gateway.expression.sentiment import Sentiment
from gateway.expression.visemes import VisemeRun, runs_from_levels, runs_from_phonemes
from gateway.brain.contract import Sentence


@dataclass(frozen=True)
class SentenceExpression:
    text: str
    action: Action | None
    sentiment: float  # -2..2
    runs: tuple[VisemeRun, ...]  # covers the audio from its first sample
    levels: tuple[float, ...]  # mouth opening 0..1 per frame of frame_ms
    frame_ms: int
    audio_ms: float  # length of the sentence's audio
    timed: bool  # True when the runs come from phoneme timings, False from audio energy
    display: str = ""  # what screens show (emoji, URLs kept); "" = the spoken text

    def fay_lips(self) -> list[dict[str, object]]:
        """Fay's `Lips`: run-length OVR visemes, [{"Lip": "aa", "Time": ms}, ...]."""
        return [{"Lip": _ovr_name(r.viseme.name), "Time": r.duration_ms} for r in self.runs]


def _ovr_name(name: str) -> str:
    return {"SIL": "sil", "KK": "kk", "NN": "nn", "AA": "aa", "IH": "ih", "OH": "oh", "OU": "ou"}.get(name, name)


class Expression:
    """Action rules + sentiment lexicon (both hot-reloaded) + the mouth frame length."""

    def __init__(self, rules: ActionRules, sentiment: Sentiment, frame_ms: int = 40,
                 hints: HintMap | None = None) -> None:
        self.rules = rules
        self.sentiment = sentiment
        self.frame_ms = frame_ms
        self.hints = hints

    @classmethod
    def from_paths(cls, rules: Path, sentiment: Path, frame_ms: int = 40, hints: Path | None = None) -> Expression:
        return cls(ActionRules(rules), Sentiment(sentiment), frame_ms, HintMap(hints) if hints is not None else None)

    def analyse(self, sentence: Sentence, chunks: list[SynthChunk]) -> SentenceExpression:
        text = sentence.speech
        rate = chunks[0].sample_rate if chunks else 16000
        samples = sum(len(c.pcm) for c in chunks)
        audio_ms = samples * 1000 / rate
        phonemes = [p for c in chunks for p in (c.phonemes or ())]
        timed = bool(chunks) and all(c.phonemes for c in chunks)
        if timed:
            runs = runs_from_phonemes(phonemes, rate)
            levels = levels_from_runs(runs, self.frame_ms)
        else:
            pcm = np.concatenate([c.pcm for c in chunks]).astype(np.float32) / 32768.0 if chunks else np.zeros(0, np.float32)
            levels = levels_from_audio(pcm, rate, self.frame_ms)
            runs = runs_from_levels(levels, self.frame_ms)
            if runs:  # the last frame may run past the audio: end the track with it
                last = runs[-1]
                runs[-1] = VisemeRun(last.viseme, last.start_ms, max(1, round(audio_ms) - last.start_ms))
        hinted = self.hints.resolve(sentence.hints, self.rules.by_code) if self.hints is not None else Hinted()
        return SentenceExpression(
            text=text,
            action=hinted.action or self.rules.match(text),
            sentiment=self.sentiment.score(text) if hinted.sentiment is None else hinted.sentiment,
            runs=tuple(runs),
            levels=tuple(levels),
            frame_ms=self.frame_ms,
            audio_ms=audio_ms,
            timed=timed,
            display=sentence.display,
        )
