"""The cross-scored second opinion (gateway/engines/asr_cross.py): a sure first transcript is kept
without a second decode; an unsure one gets the second engine's candidates too, and both engines
score every candidate, the best weighted sum kept; `asr.second_opinion_choice: cross` builds it
from the real Moonshine and Whisper, and it hears a synthesized question. The engines' scorers:
Moonshine's tokenizer gives the ids Moonshine emits, its teacher-forced score of its own
transcript is its decoder's, and each model scores the text it heard above an unrelated one."""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np
import pytest

from gateway.config import GatewayConfig
from gateway.engines.asr_confidence import Hearing, ScoredTranscript, TextScore
from gateway.engines.asr_cross import CrossScoredAsr, candidates, choose, words_of
from gateway.engines.factory import load_asr
from gateway.engines.moonshine_ort import MoonshineOnnxAsr
from gateway.engines.moonshine_tokenizer import MoonshineTokenizer
from gateway.engines.store import ModelStore
from gateway.engines.whisper_ct2 import WhisperCt2Asr

AUDIO = np.zeros(16000, np.float32)


class _Hears:
    """An engine that hears `own` (best first) and scores a text from `scores` (else -9; a value, as
    one token, or a TextScore), counting calls."""

    sample_rate = 16000

    def __init__(self, own: list[ScoredTranscript], scores: dict[str, float | TextScore] | None = None) -> None:
        self.own, self.scores = own, scores or {}
        self.hears, self.scored = 0, []  # hear() calls; every text scored

    def _score(self, texts: Sequence[str]) -> list[TextScore]:
        self.scored += list(texts)
        found = [self.scores.get(t, -9.0) for t in texts]
        return [s if isinstance(s, TextScore) else TextScore(s, 1) for s in found]

    def hear(self, audio: np.ndarray, cancel: threading.Event | None = None) -> Hearing:
        self.hears += 1
        return Hearing(tuple(self.own), self._score)

    def transcribe_scored(self, audio: np.ndarray, cancel: threading.Event | None = None) -> ScoredTranscript:
        return self.hear(audio, cancel).candidates[0]

    def transcribe(self, audio: np.ndarray, cancel: threading.Event | None = None) -> str:
        return self.transcribe_scored(audio, cancel).text


def _asr(first: _Hears, second: _Hears, threshold: float = -0.5, weight: float = 0.5) -> CrossScoredAsr:
    return CrossScoredAsr(first, second, threshold, weight)


def test_a_sure_first_transcript_is_kept_without_the_second_or_any_scoring() -> None:
    first = _Hears([ScoredTranscript("Turn on the lamp.", -0.2)])
    second = _Hears([ScoredTranscript("Turn on the lamb.", -0.1)])
    asr = _asr(first, second)
    assert asr.transcribe(AUDIO) == "Turn on the lamp."
    assert (second.hears, first.scored, asr.decodes, asr.second_opinions) == (0, [], 1, 0)


def test_an_unsure_transcript_gets_the_candidate_both_engines_score_best() -> None:
    # Each engine prefers its own transcript; the sum prefers the second's.
    wrong, right = "Turn of the lice.", "Turn off the lights."
    first = _Hears([ScoredTranscript(wrong, -0.9)], {wrong: -0.9, right: -1.0})
    second = _Hears([ScoredTranscript(right, -0.4)], {wrong: -3.0, right: -0.3})
    asr = _asr(first, second)
    heard = asr.transcribe_scored(AUDIO)
    assert heard.text == "Turn off the lights."
    assert heard.mean_logprob == pytest.approx(-1.0)  # the first engine's score of it
    assert (first.hears, second.hears, asr.decodes, asr.second_opinions) == (1, 1, 1, 1)
    assert first.scored == second.scored == [wrong, right]


def test_the_weight_is_the_first_engines_share_of_the_score() -> None:
    scores_1 = {"Dim the lamp.": -0.6, "Dim the lamb.": -0.9}
    scores_2 = {"Dim the lamp.": -1.2, "Dim the lamb.": -0.7}
    def pick(weight: float) -> str:
        return _asr(_Hears([ScoredTranscript("Dim the lamp.", -0.6)], scores_1),
                    _Hears([ScoredTranscript("Dim the lamb.", -0.7)], scores_2), weight=weight).transcribe(AUDIO)
    assert pick(1.0) == "Dim the lamp." and pick(0.0) == "Dim the lamb."
    assert pick(0.5) == "Dim the lamb."  # -0.9 + -0.7 > -0.6 + -1.2
    assert pick(0.8) == "Dim the lamp."


def test_a_text_is_scored_as_a_whole_or_per_token() -> None:
    long, short = "Turn on the lights in the hall.", "Turn on the lights."
    first = _Hears([ScoredTranscript(long, -0.7)], {long: TextScore(-5.0, 10), short: TextScore(-3.0, 4)})
    second = _Hears([ScoredTranscript(short, -0.6)], {long: TextScore(-6.0, 10), short: TextScore(-3.2, 4)})
    assert CrossScoredAsr(first, second, -0.5, 0.5, by="sum").transcribe(AUDIO) == short  # -3.1 > -5.5
    assert CrossScoredAsr(first, second, -0.5, 0.5, by="mean").transcribe(AUDIO) == long  # -0.55 > -0.775


def test_a_beam_neither_engine_put_first_can_win() -> None:
    first = _Hears([ScoredTranscript("Feed the cat.", -0.6), ScoredTranscript("Feed the cap.", -0.7)],
                   {"Feed the cat.": -0.6, "Feed the cap.": -0.7, "Feet the cap.": -2.0})
    second = _Hears([ScoredTranscript("Feet the cap.", -0.8)],
                    {"Feed the cat.": -2.5, "Feed the cap.": -0.5, "Feet the cap.": -0.8})
    assert _asr(first, second).transcribe(AUDIO) == "Feed the cap."


def test_the_same_words_are_scored_once_whatever_their_case_and_punctuation() -> None:
    first = _Hears([ScoredTranscript("Open the door.", -0.7), ScoredTranscript("open the door", -0.8)],
                   {"Open the door.": -0.7, "Open the drawer.": -1.5})
    second = _Hears([ScoredTranscript("Open the door!", -0.5), ScoredTranscript("Open the drawer.", -0.6)],
                    {"Open the door.": -0.6, "Open the drawer.": -0.5})
    assert _asr(first, second).transcribe(AUDIO) == "Open the door."
    assert first.scored == ["Open the door.", "Open the drawer."]
    assert words_of("Open the door!") == words_of("open the door") == "open the door"
    assert words_of("What's on, Bob?") == "what's on bob"


@pytest.mark.parametrize(("first", "second", "kept"), [
    ([ScoredTranscript("", 0.0)], [ScoredTranscript("Close the blinds.", -0.8)], "Close the blinds."),
    ([ScoredTranscript("Close the blinds.", -0.9)], [ScoredTranscript("", -1.5)], "Close the blinds."),
    ([ScoredTranscript("", 0.0)], [ScoredTranscript("", -1.5)], ""),
    ([ScoredTranscript("Close the blinds.", -0.9)], [ScoredTranscript("close the blinds", -0.2)], "Close the blinds."),
])
def test_one_wording_or_none_is_kept_without_scoring(first, second, kept) -> None:
    a, b = _Hears(first), _Hears(second)
    assert _asr(a, b).transcribe(AUDIO) == kept
    assert a.scored == b.scored == [] and b.hears == 1


def test_a_looped_transcript_is_unsure_and_the_bar_at_zero_asks_the_second_always() -> None:
    looped = _Hears([ScoredTranscript("No no no", -0.1, looped=True)])
    asr = _asr(looped, _Hears([ScoredTranscript("No.", -0.3)]))
    asr.transcribe(AUDIO)
    assert asr.second_opinions == 1
    sure = _asr(_Hears([ScoredTranscript("Yes.", -0.01)]), _Hears([ScoredTranscript("Yes.", -0.2)]), threshold=0.0)
    sure.transcribe(AUDIO)
    assert sure.second_opinions == 1


def test_candidates_keep_the_first_spelling_of_each_wording_in_order() -> None:
    a = Hearing((ScoredTranscript("Hi there.", -0.1), ScoredTranscript("", 0.0), ScoredTranscript("hi there", -0.2)),
                lambda t: [])
    b = Hearing((ScoredTranscript("High there.", -0.3), ScoredTranscript("Hi, there!", -0.4)), lambda t: [])
    assert [c.text for c in candidates(a, b)] == ["Hi there.", "High there."]
    assert choose(Hearing((ScoredTranscript("", 0.0),), lambda t: []), Hearing((), lambda t: []), 0.5).text == ""


def test_bad_engines_and_weights_are_refused() -> None:
    other = _Hears([ScoredTranscript("", 0.0)])
    other.sample_rate = 8000
    with pytest.raises(ValueError, match="sample rates"):
        CrossScoredAsr(_Hears([]), other, -0.5, 0.5)
    with pytest.raises(ValueError, match="weight"):
        CrossScoredAsr(_Hears([]), _Hears([]), -0.5, 1.5)


def test_the_config_names_the_key_of_a_cross_choice_without_a_second_opinion(make_config, tmp_path) -> None:
    with pytest.raises(Exception, match="second_opinion_choice 'cross' needs a second opinion"):
        make_config(tmp_path, asr={"second_opinion_choice": "cross"})
    with pytest.raises(Exception, match="asr.cross_weight"):
        make_config(tmp_path, asr={"second_opinion": "whisper", "second_opinion_choice": "cross", "cross_weight": 2})
    with pytest.raises(Exception, match="asr.second_opinion_choice"):
        make_config(tmp_path, asr={"second_opinion": "whisper", "second_opinion_choice": "both"})
    with pytest.raises(Exception, match="asr.cross_score"):
        make_config(tmp_path, asr={"second_opinion": "whisper", "second_opinion_choice": "cross",
                                   "cross_score": "max"})


def _cross_cfg(cfg: GatewayConfig, below: float, beam_size: int = 1) -> GatewayConfig:
    asr = cfg.asr.model_copy(update={"second_opinion": "whisper", "second_opinion_choice": "cross",
                                     "second_opinion_below": below, "beam_size": beam_size})
    return cfg.model_copy(update={"asr": asr})


@pytest.mark.models
def test_the_config_builds_the_ensemble_and_it_hears_a_question(prepared_cfg: GatewayConfig, speech16k) -> None:
    cfg = _cross_cfg(prepared_cfg, 0.0, beam_size=2)  # both models decode and score every utterance
    asr = load_asr(cfg, ModelStore(cfg))
    assert isinstance(asr, CrossScoredAsr)
    assert isinstance(asr._first, MoonshineOnnxAsr) and isinstance(asr._second, WhisperCt2Asr)
    heard = asr.transcribe(speech16k("Turn on the lights in the living room."))
    assert words_of(heard) == "turn on the lights in the living room"
    assert (asr.decodes, asr.second_opinions) == (1, 1)


@pytest.mark.models
def test_each_model_scores_what_it_heard_and_moonshine_tokenizes_as_it_decodes(prepared_cfg: GatewayConfig,
                                                                                speech16k) -> None:
    cfg = _cross_cfg(prepared_cfg, 0.0, beam_size=3)
    asr = load_asr(cfg, ModelStore(cfg))
    assert isinstance(asr, CrossScoredAsr)
    audio = speech16k("What time is it?")
    moonshine, whisper = asr._first.hear(audio), asr._second.hear(audio)
    assert len(moonshine.candidates) > 1  # the beams' n-best
    texts = [moonshine.candidates[0].text, whisper.candidates[0].text, "Please feed the goldfish twice."]
    ms, ws = [s.mean for s in moonshine.score(texts)], [s.mean for s in whisper.score(texts)]
    assert ms[0] == pytest.approx(moonshine.candidates[0].mean_logprob, abs=0.05)  # teacher forcing = its decode
    assert min(ms[:2]) > ms[2] + 1 and min(ws[:2]) > ws[2] + 1
    assert moonshine.score([""])[0].tokens == 1 and whisper.score([""])[0].tokens == 0  # Moonshine scores EOS
    tokenizer = MoonshineTokenizer(asr._first._tokens)
    ids = tokenizer.encode("What time is it? Twelve o'clock, café.")
    decoded = b"".join(asr._first._tokens[i] for i in ids).decode("utf-8").replace("\u2581", " ")
    assert decoded == " What time is it? Twelve o'clock, café."
