"""bench-asr's endpoint measures: whether the endpointer ended each utterance (or only the end of
the clip did), the decoded audio over the question's, and the `speech` path (the clip cut to the
question with the VAD's margins). Unit tests of the measurement's own logic: an energy VAD and
an ASR that reports how much audio it was given stand in for Silero and a model."""

from __future__ import annotations

import asyncio
import threading

import numpy as np
import pytest

from gateway.asreval.corpus import VOICES
from gateway.asreval.measure import evaluate, speech_span, through_vad
from gateway.asreval.render import RATE, Clip
from gateway.config import parse_config
from gateway.engines.asr_confidence import ScoredTranscript
from gateway.engines.asr_second_opinion import SecondOpinionAsr
from gateway.engines.fake import FakeVad
from gateway.engines.runner import EngineRunner

CFG = parse_config({"vad": {"preroll_ms": 300, "trailing_silence_ms": 500}})


class _Length:
    """AsrEngine stand-in: 'n' words, one per tenth of a second it was given."""

    sample_rate = RATE

    def transcribe(self, audio: np.ndarray, cancel: threading.Event | None = None) -> str:
        return " ".join(["n"] * round(audio.size / (RATE / 10)))


def _clip(lead_s: float, speech_s: float, tail_s: float, background: float = 0.0) -> Clip:
    rng = np.random.default_rng(1)
    speech = (0.3 * rng.standard_normal(int(RATE * speech_s))).astype(np.float32)
    audio = np.concatenate([np.zeros(int(RATE * lead_s), np.float32), speech, np.zeros(int(RATE * tail_s), np.float32)])
    audio += (background * rng.standard_normal(audio.size)).astype(np.float32)
    start = int(RATE * lead_s)
    return Clip(0, "n " * 10, VOICES[0], audio, slice(start, start + speech.size))


def _heard(clip: Clip):
    vad = FakeVad(threshold=0.05)
    runner = EngineRunner(vad, _Length(), None)  # type: ignore[arg-type]
    try:
        return asyncio.run(through_vad(CFG, runner, vad, clip.audio))
    finally:
        runner.close()


def test_an_utterance_followed_by_silence_is_endpointed() -> None:
    heard = _heard(_clip(0.6, 1.0, 1.0))
    assert len(heard.utterances) == 1 and heard.endpointed


def test_speech_running_to_the_end_of_the_clip_reaches_the_asr_but_is_not_endpointed() -> None:
    # Background talkers the VAD takes for speech: the utterance only ends with the audio.
    heard = _heard(_clip(0.6, 1.0, 1.0, background=0.2))
    assert len(heard.utterances) == 1 and not heard.endpointed
    assert heard.utterances[0].size >= int(RATE * 2.4)  # from the first background window to the end


def test_the_speech_path_cuts_the_noisy_clip_to_the_question_with_the_vad_margins() -> None:
    clip = _clip(0.6, 1.0, 1.0, background=0.2)
    span = speech_span(CFG, clip, clip.audio)
    assert span.size == int(RATE * (0.3 + 1.0 + 0.5))
    assert np.array_equal(span, clip.audio[int(RATE * 0.3): int(RATE * 2.1)])
    early = _clip(0.1, 1.0, 0.2)  # less audio around the question than the margins: the clip's edges
    assert speech_span(CFG, early, early.audio).size == early.audio.size


def test_evaluate_counts_endpointed_clips_and_the_audio_over_the_questions() -> None:
    clips = [_clip(0.6, 1.0, 1.0)]
    scores = asyncio.run(evaluate(CFG, _Length(), FakeVad(threshold=0.05), clips, ("vad", "speech")))
    vad, speech = scores[(None, "vad")], scores[(None, "speech")]
    assert (vad.survived, vad.endpointed) == (1, 1)
    assert speech.audio_s == pytest.approx(1.8) and speech.utterance_ratio == pytest.approx(1.8)
    assert 1.0 < vad.utterance_ratio < 2.0  # pre-roll + the question + the trailing silence
    noisy = scores[(5.0, "vad")]  # white noise at 5 dB over the whole clip: this VAD never hears silence
    assert (noisy.survived, noisy.endpointed) == (1, 0)


def test_an_unknown_path_is_refused_before_the_set_is_spoken(capsys: pytest.CaptureFixture[str]) -> None:
    from argparse import Namespace

    from gateway.cli.bench_asr import run

    assert run(Namespace(paths="vad,vda", json=False), CFG) == 2
    assert "--paths 'vad,vda': give one or more of whole, vad, speech" in capsys.readouterr().err


class _Sure:
    """A scoring stand-in: `words`, with this mean log-probability."""

    sample_rate = RATE

    def __init__(self, words: str, logprob: float) -> None:
        self.words, self.logprob = words, logprob

    def transcribe(self, audio: np.ndarray, cancel: threading.Event | None = None) -> str:
        return self.words

    def transcribe_scored(self, audio: np.ndarray, cancel: threading.Event | None = None) -> ScoredTranscript:
        return ScoredTranscript(self.words, self.logprob)


def test_evaluate_counts_the_decodes_the_second_opinion_ran_per_condition() -> None:
    clips = [_clip(0.6, 1.0, 1.0)]
    unsure = SecondOpinionAsr(_Sure("m", -2.0), _Sure("n", -0.1), threshold=-0.5)
    scores = asyncio.run(evaluate(CFG, unsure, FakeVad(threshold=0.05), clips, ("speech",)))
    assert [scores[(snr, "speech")].second_opinions for snr in (None, 20.0, 10.0, 5.0)] == [1, 1, 1, 1]
    assert scores[(None, "speech")].hyps == ["n"]
    sure = SecondOpinionAsr(_Sure("m", -0.1), _Sure("n", -0.1), threshold=-0.5)
    assert asyncio.run(evaluate(CFG, sure, FakeVad(threshold=0.05), clips, ("speech",)))[(None, "speech")].second_opinions == 0
    plain = asyncio.run(evaluate(CFG, _Length(), FakeVad(threshold=0.05), clips, ("speech",)))
    assert plain[(None, "speech")].second_opinions is None  # not a second-opinion engine: not counted
