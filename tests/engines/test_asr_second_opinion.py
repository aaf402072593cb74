"""The second-opinion engine (gateway/engines/asr_second_opinion.py): a sure first transcript is
kept without a second decode; an unsure, empty or looped one is decoded again and the surer of
the two kept; `asr.second_opinion: whisper` builds it from the real Moonshine and Whisper, and it
hears synthesized questions (and asks Whisper only when Moonshine is unsure)."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from gateway.config import GatewayConfig
from gateway.engines.asr_confidence import ScoredTranscript
from gateway.engines.asr_second_opinion import SecondOpinionAsr
from gateway.engines.factory import load_asr
from gateway.engines.moonshine_ort import MoonshineOnnxAsr
from gateway.engines.store import ModelStore
from gateway.engines.whisper_ct2 import WhisperCt2Asr


class _Says:
    """An engine that answers every call with the same scored transcript and counts the calls."""

    sample_rate = 16000

    def __init__(self, heard: ScoredTranscript) -> None:
        self.heard, self.calls = heard, 0

    def transcribe(self, audio: np.ndarray, cancel: threading.Event | None = None) -> str:
        return self.transcribe_scored(audio, cancel).text

    def transcribe_scored(self, audio: np.ndarray, cancel: threading.Event | None = None) -> ScoredTranscript:
        self.calls += 1
        return self.heard


AUDIO = np.zeros(16000, np.float32)


def _pair(first: ScoredTranscript, second: ScoredTranscript) -> tuple[SecondOpinionAsr, _Says, _Says]:
    a, b = _Says(first), _Says(second)
    return SecondOpinionAsr(a, b, threshold=-0.5), a, b


def test_a_sure_first_transcript_is_kept_without_asking_the_second() -> None:
    asr, _, second = _pair(ScoredTranscript("turn on the lights", -0.2), ScoredTranscript("turn on the light", -0.1))
    assert asr.transcribe(AUDIO) == "turn on the lights"
    assert second.calls == 0 and (asr.decodes, asr.second_opinions) == (1, 0)


@pytest.mark.parametrize(("first", "second", "kept"), [
    (ScoredTranscript("turn of the lice", -0.9), ScoredTranscript("turn off the lights", -0.3), "turn off the lights"),
    (ScoredTranscript("turn off the lights", -0.6), ScoredTranscript("turn of the lights", -0.8), "turn off the lights"),
    (ScoredTranscript("", 0.0), ScoredTranscript("turn off the lights", -0.8), "turn off the lights"),
    (ScoredTranscript("off off", -0.6, looped=True), ScoredTranscript("turn off", -0.4), "turn off"),
    (ScoredTranscript("turn off", -0.2, looped=True), ScoredTranscript("turn of", -0.4), "turn off"),
    (ScoredTranscript("turn off the lights", -0.9), ScoredTranscript("", -1.5), "turn off the lights"),
])
def test_an_unsure_transcript_is_decoded_again_and_the_surer_kept(first, second, kept) -> None:
    asr, a, b = _pair(first, second)
    assert asr.transcribe(AUDIO) == kept
    assert (a.calls, b.calls, asr.decodes, asr.second_opinions) == (1, 1, 1, 1)


def test_engines_of_different_sample_rates_are_refused() -> None:
    other = _Says(ScoredTranscript("", 0.0))
    other.sample_rate = 8000
    with pytest.raises(ValueError, match="sample rates"):
        SecondOpinionAsr(_Says(ScoredTranscript("", 0.0)), other, -0.5)


def _second_opinion_cfg(cfg: GatewayConfig, below: float) -> GatewayConfig:
    asr = cfg.asr.model_copy(update={"second_opinion": "whisper", "second_opinion_below": below})
    return cfg.model_copy(update={"asr": asr})


@pytest.mark.models
def test_the_config_builds_moonshine_with_whisper_behind_it(prepared_cfg: GatewayConfig, speech16k) -> None:
    cfg = _second_opinion_cfg(prepared_cfg, -0.5)
    asr = load_asr(cfg, ModelStore(cfg))
    assert isinstance(asr, SecondOpinionAsr)
    assert isinstance(asr._first, MoonshineOnnxAsr) and isinstance(asr._second, WhisperCt2Asr)
    heard = asr.transcribe(speech16k("Turn on the lights in the living room."))
    assert heard.lower().rstrip(".") == "turn on the lights in the living room"
    assert (asr.decodes, asr.second_opinions) == (1, 0)  # Moonshine was sure: Whisper never ran


@pytest.mark.models
def test_with_the_bar_at_zero_every_utterance_gets_whisper_too(prepared_cfg: GatewayConfig, speech16k) -> None:
    cfg = _second_opinion_cfg(prepared_cfg, 0.0)  # no transcript is that sure
    asr = load_asr(cfg, ModelStore(cfg))
    heard = asr.transcribe(speech16k("What time is it?"))
    assert heard.lower().rstrip("?") == "what time is it"
    assert (asr.decodes, asr.second_opinions) == (1, 1)


def test_a_second_opinion_needs_moonshine_first(make_config, tmp_path) -> None:
    with pytest.raises(Exception, match="second_opinion 'whisper' needs engine moonshine"):
        make_config(tmp_path, asr={"engine": "whisper", "second_opinion": "whisper"})
