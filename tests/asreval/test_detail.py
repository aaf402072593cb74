"""`gateway bench-asr --detail`: WER per speaker kind and noise kind, and the misheard utterances."""

from __future__ import annotations

import numpy as np
import pytest

from gateway.asreval.corpus import VOICES
from gateway.asreval.detail import breakdown, misheard
from gateway.asreval.measure import Score
from gateway.asreval.render import Clip


def _clip(index: int, voice: int, text: str) -> Clip:
    return Clip(index, text, VOICES[voice], np.zeros(16000, np.float32), slice(0, 16000))


def test_errors_are_counted_per_speaker_kind_and_per_noise_kind() -> None:
    # VOICES[0] is the piper voice, VOICES[3] an espeak-ng one; clip 0 has white noise, clip 1 pink.
    clips = [_clip(0, 0, "turn the lights off"), _clip(1, 3, "open the door")]
    clean = Score(refs=[c.text for c in clips], hyps=["turn the lights off", "open a door"])
    noisy = Score(refs=[c.text for c in clips], hyps=["turn lights", ""])
    groups = breakdown(clips, {(None, "vad"): clean, (10.0, "vad"): noisy}, "vad")
    assert groups["voice:piper"] == {"clean": 0.0, "10dB": pytest.approx(2 / 4)}
    assert groups["voice:espeak-ng"] == {"clean": pytest.approx(1 / 3), "10dB": 1.0}
    assert groups["noise:white"] == {"10dB": pytest.approx(2 / 4)}
    assert groups["noise:pink"] == {"10dB": 1.0}
    assert groups["noise:babble"] == {"10dB": 0.0}  # no babble clip here: no words, no errors


def test_only_misheard_utterances_are_listed_with_what_was_said_and_heard() -> None:
    clips = [_clip(0, 0, "turn the lights off"), _clip(2, 3, "open the door")]
    lines: list[str] = []
    misheard(clips, {(None, "vad"): Score(refs=[c.text for c in clips], hyps=["Turn the lights off.", ""])},
             "vad", lines.append)
    assert len(lines) == 1
    assert "clean" in lines[0] and VOICES[3].label in lines[0] and "3/3" in lines[0]
    assert lines[0].rstrip().endswith("open the door | (nothing)")
