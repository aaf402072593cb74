"""Visemes from phoneme timings, the energy fallback and the mouth frames (pure logic + real TTS)."""

from __future__ import annotations

import numpy as np
import pytest

from firmware_protocol import Viseme
from gateway.engines.base import SynthChunk
from gateway.expression.mouth import levels_from_audio, levels_from_runs, to_bytes
from gateway.expression.visemes import IPA_TO_VISEME, MIN_RUN_MS, OPEN, runs_from_phonemes

RATE = 22050


def samples(ms: float) -> int:
    return round(ms * RATE / 1000)


def test_every_ovr_viseme_has_ipa_phonemes_and_the_seed_mouth_opening() -> None:
    assert set(IPA_TO_VISEME.values()) == set(Viseme)
    assert OPEN[Viseme.SIL] == 0.0 and OPEN[Viseme.PP] == OPEN[Viseme.FF] == OPEN[Viseme.NN] == 0.25
    assert OPEN[Viseme.TH] == OPEN[Viseme.DD] == OPEN[Viseme.CH] == OPEN[Viseme.SS] == OPEN[Viseme.IH] == 0.45
    assert OPEN[Viseme.KK] == OPEN[Viseme.E] == OPEN[Viseme.OH] == 0.65
    assert OPEN[Viseme.AA] == OPEN[Viseme.OU] == 0.85


def test_a_word_maps_to_its_visemes_and_covers_the_audio_exactly() -> None:
    # "map": m, stress, a, p between BOS and EOS pauses
    ph = [("^", samples(40)), ("m", samples(60)), ("ˈ", samples(20)), ("æ", samples(120)), ("p", samples(70)), ("$", samples(50))]
    runs = runs_from_phonemes(ph, RATE)
    assert [r.viseme for r in runs] == [Viseme.SIL, Viseme.PP, Viseme.AA, Viseme.PP, Viseme.SIL]
    assert runs[2].duration_ms == 140  # the stress mark's time goes to the stressed vowel
    assert runs[0].start_ms == 0 and sum(r.duration_ms for r in runs) == round(sum(n for _, n in ph) * 1000 / RATE)


def test_length_marks_and_unknown_symbols_extend_the_previous_viseme() -> None:
    runs = runs_from_phonemes([("u", samples(80)), ("ː", samples(60)), ("5", samples(40))], RATE)
    assert [(r.viseme, r.duration_ms) for r in runs] == [(Viseme.OU, 180)]


def test_runs_shorter_than_30_ms_are_merged_into_the_previous_one() -> None:
    runs = runs_from_phonemes([("a", samples(100)), ("b", samples(20)), ("i", samples(100))], RATE)
    assert [(r.viseme, r.duration_ms) for r in runs] == [(Viseme.AA, 120), (Viseme.IH, 100)]
    assert all(r.duration_ms >= MIN_RUN_MS for r in runs)


def test_energy_levels_close_the_mouth_in_silence_and_open_it_on_loud_audio() -> None:
    t = np.arange(RATE) / RATE
    audio = np.concatenate([np.zeros(RATE // 2), 0.5 * np.sin(2 * np.pi * 200 * t)]).astype(np.float32)
    levels = levels_from_audio(audio, RATE, 40)
    assert len(levels) == round(1.5 / 0.04)
    assert max(levels[:12]) == 0.0 and min(levels[14:-1]) > 0.9


def test_mouth_frames_follow_the_viseme_openings() -> None:
    runs = runs_from_phonemes([("^", samples(80)), ("a", samples(80)), ("m", samples(80))], RATE)
    assert to_bytes(levels_from_runs(runs, 40)) == bytes([0, 0, 217, 217, 64, 64])


@pytest.mark.models
def test_real_tts_phoneme_timings_give_a_track_as_long_as_the_audio(runner) -> None:
    chunks: list[SynthChunk] = list(runner.tts.synthesize("The quick brown fox jumps over the lazy dog."))
    assert all(c.phonemes for c in chunks), "the prepared voice must be the alignment-patched one"
    for c in chunks:
        runs = runs_from_phonemes(c.phonemes, c.sample_rate)
        audio_ms = len(c.pcm) * 1000 / c.sample_rate
        assert abs(runs[-1].end_ms - audio_ms) < 1
        assert {Viseme.DD, Viseme.KK, Viseme.AA, Viseme.OU} <= {r.viseme for r in runs}
