"""The echo check on synthetic signals: the reply's own echo (delayed, attenuated, noisy) is
recognised at every delay; a second voice over it is not echo."""

from __future__ import annotations

import numpy as np
import pytest

from gateway.voice.echo import EchoReference, similarity

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
