"""Noise for the evaluation set, mixed at a given SNR: white, pink (1/f) and babble.

Babble is four other clips of the set (other sentences, other voices) summed, each looped and
offset, like people talking in the background. The SNR is measured on the speech part of the
clip (its power over the speech samples) against the noise's power over the whole clip, and the
noise covers the whole clip, silence before and after the question included. Seeded per clip,
so the same set comes out every time.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from gateway.asreval.render import Clip

NoiseKind = Literal["white", "pink", "babble"]
KINDS: tuple[NoiseKind, ...] = ("white", "pink", "babble")
_BABBLE_TALKERS = 4


def white(n: int, rng: np.random.Generator) -> np.ndarray:
    return rng.standard_normal(n).astype(np.float32)


def pink(n: int, rng: np.random.Generator) -> np.ndarray:
    """1/f power spectrum: white noise shaped in the frequency domain (amplitude 1/sqrt(f))."""
    spectrum = np.fft.rfft(rng.standard_normal(n))
    f = np.arange(spectrum.size, dtype=np.float64)
    f[0] = 1.0
    return np.fft.irfft(spectrum / np.sqrt(f), n).astype(np.float32)


def babble(n: int, rng: np.random.Generator, others: list[Clip]) -> np.ndarray:
    out = np.zeros(n, np.float32)
    for k in rng.choice(len(others), size=min(_BABBLE_TALKERS, len(others)), replace=False):
        talk = others[int(k)].audio[others[int(k)].speech]
        talk = talk / (np.sqrt(np.mean(talk**2)) + 1e-9)
        start = int(rng.integers(0, talk.size))
        out += np.resize(np.roll(talk, -start), n)  # looped to the clip's length
    return out


def mix(clip: Clip, kind: NoiseKind, snr_db: float, clips: list[Clip], seed: int = 18) -> np.ndarray:
    """The clip with `kind` noise added at `snr_db` dB SNR (speech power vs noise power)."""
    rng = np.random.default_rng([seed, clip.index, KINDS.index(kind), int(snr_db * 10)])
    n = clip.audio.size
    if kind == "white":
        noise = white(n, rng)
    elif kind == "pink":
        noise = pink(n, rng)
    else:
        noise = babble(n, rng, [c for c in clips if c.index != clip.index and c.voice != clip.voice] or clips)
    speech_power = float(np.mean(clip.audio[clip.speech] ** 2))
    noise_power = float(np.mean(noise**2)) + 1e-12
    gain = np.sqrt(speech_power / (noise_power * 10 ** (snr_db / 10)))
    mixed = clip.audio + gain * noise
    peak = float(np.max(np.abs(mixed)))
    return (mixed / peak * 0.99 if peak > 0.99 else mixed).astype(np.float32)
