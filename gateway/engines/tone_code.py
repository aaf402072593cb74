"""A tone code that carries text through audio: what the fake TTS "says", the fake ASR reads back.

Each UTF-8 byte of the text becomes two tone bursts of `nibble_ms` each: its high nibble on one
of 16 frequencies of bank A (300 .. 1800 Hz), its low nibble on one of 16 frequencies of bank B
(1900 .. 3400 Hz). Consecutive bursts therefore always differ in frequency, so the decoder needs
no clock: it classifies short frames by their strongest candidate frequency, merges runs, drops
runs too short to be a burst (a frame straddling two bursts) and pairs A with the following B.
A pause of `PAUSE_MS` or more between bursts is heard as a word space, as a real ASR would.

Everything stays below 4 kHz, so the code survives resampling to any device rate (8 kHz
included), int16 quantization, a clipped onset (a burst needs only ~8 ms left) and silence
before, after or between sentences. numpy only; deterministic.
"""

from __future__ import annotations

import numpy as np

FREQS_HZ = np.arange(32) * 100.0 + 300.0  # bank A: 0..15, bank B: 16..31
AMPLITUDE = 0.25
FRAME_MS = 10.0
HOP_MS = 2.5
MIN_RUN = 3  # hops: a burst of >= 15 ms always has this many clean frames
SILENCE_RMS = 0.05
PAUSE_MS = 100.0
SILENT = -1


def burst_samples(sample_rate: int, nibble_ms: float) -> int:
    return max(1, round(sample_rate * nibble_ms / 1000))


def symbols_of(text: str) -> list[int]:
    """Candidate-frequency indices, two per UTF-8 byte (bank A high nibble, bank B low nibble)."""
    out: list[int] = []
    for byte in text.encode("utf-8"):
        out += [byte >> 4, 16 + (byte & 0x0F)]
    return out


def encode(text: str, sample_rate: int, nibble_ms: float = 20.0) -> np.ndarray:
    """float32 mono audio of `text` in the tone code (phase-continuous, no gaps)."""
    n = burst_samples(sample_rate, nibble_ms)
    freqs = np.repeat(FREQS_HZ[symbols_of(text)], n)
    phase = 2 * np.pi * np.cumsum(freqs) / sample_rate
    return (AMPLITUDE * np.sin(phase)).astype(np.float32)


def _frame_symbols(audio: np.ndarray, sample_rate: int) -> list[int]:
    """The strongest candidate per frame, -1 for a silent frame."""
    size = max(8, round(sample_rate * FRAME_MS / 1000))
    hop = max(1, round(sample_rate * HOP_MS / 1000))
    if audio.size < size:
        return []
    starts = np.arange(0, audio.size - size + 1, hop)
    frames = audio[starts[:, None] + np.arange(size)[None, :]].astype(np.float64)
    rms = np.sqrt(np.mean(frames * frames, axis=1))
    t = np.arange(size) / sample_rate
    basis = np.hanning(size)[:, None] * np.exp(-2j * np.pi * t[:, None] * FREQS_HZ[None, :])
    best = np.argmax(np.abs(frames @ basis), axis=1)
    return [int(b) if r >= SILENCE_RMS else SILENT for b, r in zip(best, rms)]


def _runs(symbols: list[int]) -> list[tuple[int, int]]:
    runs: list[tuple[int, int]] = []
    for s in symbols:
        if runs and runs[-1][0] == s:
            runs[-1] = (s, runs[-1][1] + 1)
        else:
            runs.append((s, 1))
    return runs


def decode(audio: np.ndarray, sample_rate: int) -> str:
    """The text carried by `audio` (empty when there is none); other sounds decode to noise."""
    pause_hops = PAUSE_MS / HOP_MS
    bursts: list[tuple[int, int]] = []  # (symbol, hops)
    for symbol, length in _runs(_frame_symbols(np.asarray(audio, np.float32), sample_rate)):
        if length < MIN_RUN:
            continue
        if bursts and bursts[-1][0] == symbol:  # a dropped straddle split one run
            bursts[-1] = (symbol, bursts[-1][1] + length)
        else:
            bursts.append((symbol, length))
    data = bytearray()
    high: int | None = None
    for s, length in bursts:
        if 0 <= s < 16:
            high = s
        elif s >= 16 and high is not None:
            data.append(high << 4 | (s - 16))
            high = None
        else:  # silence, or a low nibble whose high one was lost
            high = None
            if s == SILENT and length >= pause_hops and data and data[-1] != 0x20:
                data.append(0x20)
    return data.decode("utf-8", errors="ignore").strip()
