"""Mouth-open values per frame: from a viseme track, or from the audio's loudness as a fallback.

The energy fallback (for TTS engines without phoneme timings) takes the RMS of each frame,
normalises it to the sentence's loudest frame, gates frames below `GATE` of it to closed, and
applies a square root so quiet speech still opens the mouth visibly.
"""

from __future__ import annotations

import math

import numpy as np

from gateway.expression.visemes import VisemeRun

GATE = 0.08


def frame_count(duration_ms: float, frame_ms: int) -> int:
    return max(0, math.ceil(duration_ms / frame_ms - 1e-9))


def levels_from_audio(pcm: np.ndarray, sample_rate: int, frame_ms: int) -> list[float]:
    """Mouth opening 0..1 per frame of `frame_ms` from float32 mono audio."""
    if pcm.size == 0:
        return []
    size = max(1, sample_rate * frame_ms // 1000)
    count = math.ceil(pcm.size / size)
    padded = np.zeros(count * size, dtype=np.float32)
    padded[: pcm.size] = pcm
    rms = np.sqrt(np.mean(np.square(padded.reshape(count, size)), axis=1))
    peak = float(rms.max())
    if peak < 1e-4:
        return [0.0] * count
    rel = rms / peak
    rel[rel < GATE] = 0.0
    return [round(float(v), 3) for v in np.sqrt(rel)]


def levels_from_runs(runs: list[VisemeRun], frame_ms: int) -> list[float]:
    """Mouth opening 0..1 per frame: the opening of the run at each frame's middle."""
    if not runs:
        return []
    out = []
    i = 0
    for f in range(frame_count(runs[-1].end_ms, frame_ms)):
        t = f * frame_ms + frame_ms / 2
        while i < len(runs) - 1 and runs[i].end_ms <= t:
            i += 1
        out.append(runs[i].open)
    return out


def to_bytes(levels: list[float]) -> bytes:
    """0..1 levels as 0..255 bytes (the Mouth message's values)."""
    return bytes(max(0, min(255, round(v * 255))) for v in levels)
