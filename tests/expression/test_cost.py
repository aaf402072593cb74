"""Expression costs at most 2% of the TTS CPU time (real TTS), and works without phoneme timings."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from gateway.brain.contract import Sentence
from gateway.engines.base import SynthChunk
from gateway.expression.bench import default_measure, report
from gateway.expression.sentence import Expression

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.models
def test_expression_costs_at_most_two_percent_of_the_tts_cpu_time(runner) -> None:
    cost = default_measure(runner.tts, ROOT)
    print(report(cost))
    assert cost.ratio <= 0.02, report(cost)


@pytest.mark.models
def test_a_tts_without_phoneme_timings_falls_back_to_an_energy_mouth_as_long_as_the_audio(runner) -> None:
    timed = list(runner.tts.synthesize("Thank you, goodbye."))
    untimed = [SynthChunk(c.pcm, c.sample_rate) for c in timed]  # what an engine without alignments gives
    expression = Expression.from_paths(ROOT / "config" / "action_rules.csv", ROOT / "config" / "sentiment.yaml")
    expr = expression.analyse(Sentence("Thank you, goodbye."), untimed)
    assert not expr.timed
    assert abs(expr.runs[-1].end_ms - expr.audio_ms) <= 1 and expr.runs[0].start_ms == 0
    assert len(expr.levels) == int(np.ceil(expr.audio_ms / 40)) and max(expr.levels) == 1.0
    assert len({r.viseme for r in expr.runs}) >= 3
    assert expr.action is not None and expr.action.code == "farewell.goodbye"
