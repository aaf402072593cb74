"""The listen-mode state machine, driven by audio time (no models, no clock)."""

from __future__ import annotations

import pytest

from gateway.config.listen import DEFAULT_STOP_WORDS, ListenConfig
from gateway.voice.listen_mode import Listening, ListenMode, StopWords, Verdict


def test_always_every_utterance_is_a_turn() -> None:
    m = ListenMode("always")
    assert m.state is Listening.LISTENING
    assert m.wake(100) is None  # a wake word changes nothing
    assert m.utterance(0, 2000).verdict is Verdict.TURN
    assert m.utterance(5000, 7000).cut_ms == 0


def test_ptt_needs_no_wake_word() -> None:
    assert ListenMode("ptt").utterance(0, 1000).verdict is Verdict.TURN


def test_wake_without_the_wake_word_no_turn() -> None:
    m = ListenMode("wake")
    assert m.state is Listening.ASLEEP
    assert not m.is_open(1000)
    assert m.utterance(1000, 3000).verdict is Verdict.DROP


def test_wake_word_and_question_in_one_breath_cuts_at_the_detection() -> None:
    m = ListenMode("wake")
    assert m.wake(1900) is Listening.WOKEN  # "okay nabu" detected at 1.9 s of audio
    out = m.utterance(1000, 3500)  # the utterance started at 1.0 s (pre-roll included)
    assert out.verdict is Verdict.TURN and out.cut_ms == pytest.approx(900)
    assert m.advance(3600) is Listening.ASLEEP  # the turn took the window
    assert m.utterance(8000, 9000).verdict is Verdict.DROP  # the next one needs the wake word again


def test_bare_wake_word_opens_a_window_for_the_question() -> None:
    m = ListenMode("wake", wake_window_ms=5000)
    m.wake(1500)
    assert m.utterance(800, 1600).verdict is Verdict.DROP  # "okay nabu" ... (pause)
    assert m.is_open(4000)
    out = m.utterance(4000, 6000)  # ... "what time is it"
    assert out.verdict is Verdict.TURN and out.cut_ms == 0


def test_bare_wake_word_window_runs_out() -> None:
    m = ListenMode("wake", wake_window_ms=5000)
    m.wake(1500)
    m.utterance(800, 1600)
    assert m.advance(6000) is None
    assert m.advance(6700) is Listening.ASLEEP
    assert m.utterance(7000, 9000).verdict is Verdict.DROP


def test_follow_up_window_after_a_reply_played_to_its_end() -> None:
    m = ListenMode("follow-up", follow_up_ms=6000)
    m.wake(1000)
    assert m.utterance(500, 3000).verdict is Verdict.TURN
    m.reply_started()
    assert m.reply_ended(8000, aborted=False) is Listening.LISTENING
    assert m.utterance(10_000, 12_000).verdict is Verdict.TURN  # answered without the wake word
    m.reply_started()
    m.reply_ended(15_000, aborted=False)
    assert m.advance(20_999) is None
    assert m.advance(21_000) is Listening.ASLEEP  # nobody answered in 6 s
    assert m.utterance(22_000, 23_000).verdict is Verdict.DROP


def test_no_follow_up_window_in_wake_mode_or_after_an_interrupted_reply() -> None:
    m = ListenMode("wake")
    m.reply_started()
    assert m.reply_ended(5000, aborted=False) is None
    assert m.utterance(6000, 7000).verdict is Verdict.DROP
    f = ListenMode("follow-up")
    f.reply_started()
    assert f.reply_ended(5000, aborted=True) is None
    assert f.utterance(6000, 7000).verdict is Verdict.DROP


def test_unaddressed_speech_during_a_reply_is_checked_for_a_stop_word() -> None:
    m = ListenMode("wake")
    m.reply_started()
    assert m.utterance(1000, 1500).verdict is Verdict.CHECK_STOP
    m.reply_ended(3000, aborted=True)
    assert m.utterance(4000, 4500).verdict is Verdict.DROP


def test_wake_word_during_a_reply_is_a_turn() -> None:
    m = ListenMode("wake")
    m.reply_started()
    assert m.wake(2000) is Listening.WOKEN  # the conversation interrupts the reply on this
    assert m.utterance(1500, 4000).verdict is Verdict.TURN


def test_a_wake_word_from_an_earlier_utterance_does_not_address_a_later_one() -> None:
    m = ListenMode("wake", wake_window_ms=1000)
    m.wake(1000)
    assert m.utterance(500, 1100).verdict is Verdict.DROP  # bare: window to 2.1 s
    m.advance(3000)
    assert m.utterance(3000, 5000).verdict is Verdict.DROP


@pytest.mark.parametrize("text", ["Stop.", "stop!", "Please stop", "Be quiet.", "OK, stop now.", "停", "停！",
                                  "别说了。", "That's enough.", "闭嘴吧"])
def test_stop_words(text: str) -> None:
    assert StopWords(ListenConfig().stop_words).matches(text)


@pytest.mark.parametrize("text", ["", "Stop the music in the kitchen", "What time is it?", "don't stop",
                                  "停车场在哪里"])
def test_not_stop_words(text: str) -> None:
    assert not StopWords(DEFAULT_STOP_WORDS).matches(text)


def test_configured_stop_words_are_normalised() -> None:
    assert ListenConfig(stop_words=(" Halt ", "")).stop_words == ("halt",)
    assert StopWords(("halt",)).matches("Halt!")


def test_mode_per_device() -> None:
    c = ListenConfig(mode="wake", devices={"kitchen": "always"})
    assert c.mode_for("kitchen", wakes_itself=False) == "always"
    assert c.mode_for("hall", wakes_itself=False) == "wake"
    assert c.mode_for("hall", wakes_itself=True) == "always"  # the box wakes itself (Hello capability)
    assert c.needs_wake_word() and not ListenConfig().needs_wake_word()
    assert ListenConfig(devices={"x": "follow-up"}).needs_wake_word()
