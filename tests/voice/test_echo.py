"""The echo check on synthetic signals: the reply's own echo (delayed, attenuated, noisy) is
recognised at every delay and across a cut the reference misplaced; a second voice over it is not
echo; an unsure utterance's words tell its echo from a voice."""

from __future__ import annotations

import numpy as np
import pytest

from gateway.voice.echo import EchoReference, Verdict, cut_similarity, similarity
from gateway.voice.echo_guard import is_echo_of, words_of

RATE = 16000


def speechlike(seconds: float, seed: int) -> np.ndarray:
    """Noise shaped like speech: a low-pass carrier switched on and off at syllable rate."""
    rng = np.random.default_rng(seed)
    n = int(seconds * RATE)
    carrier = np.convolve(rng.normal(0, 1, n), np.ones(8) / 8, mode="same")
    envelope = (np.sin(np.arange(n) * 2 * np.pi * 4 / RATE) > -0.3).astype(np.float64)
    return (0.2 * carrier * envelope).astype(np.float32)


def pcm(audio: np.ndarray) -> bytes:
    return (np.clip(audio, -1, 1) * 32767).astype("<i2").tobytes()


@pytest.mark.parametrize("delay_ms", [50, 120, 200, 300])
@pytest.mark.parametrize("gain", [0.1, 0.5, 1.0])
def test_the_echo_is_recognised_at_every_delay(delay_ms: int, gain: float) -> None:
    reply = speechlike(3.0, seed=1)
    ref = EchoReference(RATE)
    ref.played(pcm(reply), 0.0)
    d = delay_ms * RATE // 1000
    rng = np.random.default_rng(delay_ms)
    mic = (np.concatenate([np.zeros(d, np.float32), reply])[: reply.size] * gain
           + rng.normal(0, 0.01 * gain, reply.size)).astype(np.float32)
    noise = float(np.mean(rng.normal(0, 0.01 * gain, 4000) ** 2))
    for start in range(0, reply.size - 4000, 2000):  # the onset included (window before the echo)
        assert ref.explains(mic[start : start + 4000], 0.9, noise)


def test_a_voice_over_the_echo_is_not_echo() -> None:
    reply, voice = speechlike(3.0, seed=1), speechlike(1.0, seed=2)
    ref = EchoReference(24000)
    ref.played(pcm(np.repeat(reply, 3)[::2]), 0.0)  # the device's output rate: 24 kHz
    mic = np.concatenate([np.zeros(1600, np.float32), reply])[: reply.size] * 0.5
    mic[RATE : RATE + voice.size] += voice * 0.5
    assert not ref.explains(mic[RATE + 800 : RATE + 4800], 0.9, 1e-6)
    assert similarity(mic[RATE + 800 : RATE + 4800], reply) < 0.9


def test_nothing_played_explains_nothing() -> None:
    ref = EchoReference(RATE)
    assert ref.empty and not ref.explains(speechlike(0.25, seed=3), 0.9, None)
    ref.played(pcm(np.zeros(RATE, np.float32)), 0.0)
    assert similarity(speechlike(0.25, seed=3), np.zeros(RATE, np.float32)) == 0.0


def test_a_late_piece_leaves_the_gap_the_box_heard() -> None:
    a, b = speechlike(1.0, seed=4), speechlike(1.0, seed=5)
    ref = EchoReference(RATE)
    ref.played(pcm(a), 0.0)
    ref.played(pcm(b), 1.5)  # sent 0.5 s after the box ran out: it played 0.5 s of silence
    mic = np.concatenate([a, np.zeros(RATE // 2, np.float32), b])  # what the box played
    for start in range(0, mic.size - 4000, 1000):
        assert ref.explains(mic[start : start + 4000] * 0.5, 0.9, 1e-6), start


@pytest.mark.parametrize("missing_s, extra_s", [(0.3, 0.0), (0.0, 0.3)])
def test_a_window_across_a_cut_the_reference_misplaced_is_still_the_echo(missing_s: float, extra_s: float) -> None:
    """The box played a gap the reference does not have (or the reference has one the box did not play):
    a window across that cut holds two pieces at two delays; compared in parts it is the echo."""
    a, b = speechlike(1.0, seed=6), speechlike(1.0, seed=7)
    ref = EchoReference(RATE)
    ref.played(pcm(np.concatenate([a, np.zeros(int(extra_s * RATE), np.float32), b])), 0.0)
    played = np.concatenate([a, np.zeros(int(missing_s * RATE), np.float32), b])  # what the box played
    cut = a.size + int(missing_s * RATE) // 2
    rng = np.random.default_rng(3)
    mic = (played * 0.5 + rng.normal(0, 0.003, played.size)).astype(np.float32)
    window = mic[cut - 2500 : cut + 1500]  # 250 ms across the cut
    assert similarity(window, ref._reference()) < 0.9  # as a whole it is not the echo
    assert ref.verdict(window, 0.9, 0.003**2) is Verdict.ECHO


def test_a_voice_over_the_echo_across_a_cut_is_not_echo() -> None:
    a, b, voice = speechlike(1.0, seed=6), speechlike(1.0, seed=7), speechlike(1.0, seed=8)
    ref = EchoReference(RATE)
    ref.played(pcm(np.concatenate([a, b])), 0.0)
    mic = np.concatenate([a, np.zeros(RATE // 5, np.float32), b]) * 0.5  # the box played a 0.2 s gap
    mic[RATE - 4000 : RATE + 4000] += voice[:8000] * 0.5  # a person as loud as the echo, over the cut
    assert ref.verdict(mic[RATE - 2000 : RATE + 2000], 0.9, 1e-6) is Verdict.VOICE
    assert cut_similarity(mic[RATE - 2000 : RATE + 2000], ref._reference()) < 0.8


@pytest.mark.parametrize("heard, echo", [("once upon a time there", True), ("a small robot that", True),
                                         ("", True), ("what time is it", False), ("stop the story please", False),
                                         ("upon a time what", True)])
def test_the_words_of_an_unsure_utterance_tell_its_echo_from_a_voice(heard: str, echo: bool) -> None:
    played = words_of("Once upon a time there was a small robot that lived in a very big house.")
    assert is_echo_of(heard, played) is echo


def test_the_reference_is_the_last_seconds_sent_chunk_by_chunk() -> None:
    """Chunks of 40 ms, 4 s of them: the reference is the last 3 s, as one array, in order."""
    audio = speechlike(4.0, seed=9)
    ref = EchoReference(RATE, keep_s=3.0)
    step = RATE * 40 // 1000
    for k, start in enumerate(range(0, audio.size, step)):
        ref.played(pcm(audio[start : start + step]), k * 0.04)
    expected = np.frombuffer(pcm(audio), "<i2").astype(np.float32) / 32768.0
    np.testing.assert_array_equal(ref._reference(), expected[-3 * RATE :])
    ref.played(pcm(audio[:step]), 4.0)  # more after a comparison: still the last 3 s
    np.testing.assert_array_equal(ref._reference(), np.concatenate([expected, expected[:step]])[-3 * RATE :])


def test_a_check_says_what_its_verdict_was_made_of() -> None:
    reply = speechlike(2.0, seed=5)
    ref = EchoReference(RATE)
    ref.played(pcm(reply), 0.0)
    echo = ref.check(reply[8000:12000] * 0.5, 0.9, 1e-6)
    assert echo.verdict is Verdict.ECHO and echo.similarity > 0.99
    voice = ref.check(speechlike(0.25, seed=6), 0.9, 1e-6)
    assert voice.verdict is Verdict.VOICE and voice.similarity < 0.8
    assert voice.power == pytest.approx(float(np.mean(speechlike(0.25, seed=6).astype(np.float64) ** 2)))
    assert "dB over the room noise" in voice.describe()
    assert "not known yet" in ref.check(speechlike(0.25, seed=6), 0.9, None).describe()


def test_audio_sent_far_ahead_of_playback_leaves_what_plays_now_in_the_reference() -> None:
    """A burst: 6 s of reply sent at once (the gateway's loop stalled, then its pacer caught up), the
    box playing it on its own clock. At box time 1.2 s the echo of what it plays then is recognised;
    compared with the last 3 s sent (what the box plays from 3 s on) it is not."""
    reply = speechlike(6.0, seed=11)
    ref = EchoReference(RATE)
    ref.played(pcm(reply), 0.0)
    delay = 50 * RATE // 1000
    mic = np.concatenate([np.zeros(delay, np.float32), reply])[: reply.size] * 0.5
    mic = (mic + np.random.default_rng(11).normal(0, 0.003, mic.size)).astype(np.float32)
    window = mic[int(1.2 * RATE) - 4000 : int(1.2 * RATE)]  # the last 250 ms heard at box time 1.2 s
    assert ref.verdict(window, 0.9, 0.003**2, 1.2) is Verdict.ECHO
    assert ref.verdict(window, 0.9, 0.003**2) is Verdict.VOICE  # the last 3 s sent do not hold it
    late = mic[int(4.0 * RATE) - 4000 : int(4.0 * RATE)]
    assert ref.verdict(late, 0.9, 0.003**2, 4.0) is Verdict.ECHO


def test_a_cut_reply_leaves_the_reference_with_what_was_played_and_the_next_reply_plays_from_then() -> None:
    """A barge-in at box time 1.0 s while 2 s more were queued: the box dropped them. The next reply,
    sent at 1.5 s, plays from 1.5 s; its echo at 2.0 s is recognised (the reference without the
    dropped audio: with it, the next reply was laid out 2 s late and its echo taken for a voice)."""
    first, second = speechlike(3.0, seed=12), speechlike(2.0, seed=13)
    ref = EchoReference(RATE)
    ref.played(pcm(first), 0.0)
    ref.stopped(1.0)
    ref.played(pcm(second), 1.5)
    box = np.zeros(int(3.5 * RATE), np.float32)  # what the box played, on its clock
    box[:RATE] = first[:RATE]
    box[int(1.5 * RATE) :] = second
    delay = 50 * RATE // 1000
    mic = np.concatenate([np.zeros(delay, np.float32), box])[: box.size] * 0.5
    mic = (mic + np.random.default_rng(12).normal(0, 0.003, mic.size)).astype(np.float32)
    for at in (2.0, 2.5, 3.0):
        window = mic[int(at * RATE) - 4000 : int(at * RATE)]
        assert ref.verdict(window, 0.9, 0.003**2, at) is Verdict.ECHO, at
    assert ref.verdict(mic[int(0.9 * RATE) - 4000 : int(0.9 * RATE)], 0.9, 0.003**2, 0.9) is Verdict.ECHO
