"""PCM conversions, resampling and chunking. numpy + soxr only; no I/O."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import soxr


def s16le_to_float(data: bytes, channels: int = 1) -> np.ndarray:
    """Little-endian int16 PCM bytes -> mono float32 in [-1, 1] (channels are averaged)."""
    usable = len(data) - len(data) % (2 * channels)
    samples = np.frombuffer(data, dtype="<i2", count=usable // 2).astype(np.float32)  # no copy of the bytes
    samples *= 1 / 32768.0  # in place: the same values as a division (a power of two)
    if channels > 1:
        samples = samples.reshape(-1, channels).mean(axis=1)
    return samples


def float_to_s16le(samples: np.ndarray) -> bytes:
    clipped = np.minimum(np.maximum(samples, -1.0), 32767 / 32768)  # np.clip, without its per-call overhead
    return (clipped * 32768.0).astype("<i2").tobytes()


def int16_to_float(pcm: np.ndarray) -> np.ndarray:
    return pcm.astype(np.float32) / 32768.0


def rms_dbfs(samples: np.ndarray) -> float:
    """Loudness of float samples in dBFS (-inf for digital silence)."""
    if samples.size == 0:
        return float("-inf")
    rms = float(np.sqrt(np.mean(np.square(samples, dtype=np.float64))))
    return 20 * np.log10(rms) if rms > 0 else float("-inf")


class StreamResampler:
    """Streaming mono resampler (soxr) that is a no-op when the rates match."""

    def __init__(self, in_rate: int, out_rate: int) -> None:
        self.in_rate = in_rate
        self.out_rate = out_rate
        self._stream = None if in_rate == out_rate else soxr.ResampleStream(in_rate, out_rate, 1, dtype="float32")

    def push(self, samples: np.ndarray, last: bool = False) -> np.ndarray:
        if self._stream is None:
            return samples.astype(np.float32, copy=False)
        return self._stream.resample_chunk(samples.astype(np.float32, copy=False), last=last)


def resample(samples: np.ndarray, in_rate: int, out_rate: int) -> np.ndarray:
    if in_rate == out_rate:
        return samples.astype(np.float32, copy=False)
    return soxr.resample(samples.astype(np.float32, copy=False), in_rate, out_rate).astype(np.float32, copy=False)


def split_bytes(data: bytes, size: int) -> Iterator[bytes]:
    """Cut `data` into pieces of `size` bytes (the last one may be shorter)."""
    for start in range(0, len(data), size):
        yield data[start : start + size]


def chunk_bytes(sample_rate: int, chunk_ms: int, channels: int = 1) -> int:
    """Bytes of s16le PCM in one chunk of `chunk_ms` milliseconds (always even)."""
    return max(2 * channels, int(sample_rate * chunk_ms / 1000) * 2 * channels)
