"""Whisper's log-mel features in numpy (what faster-whisper's FeatureExtractor computes).

16 kHz audio, a 400-sample Hann window every 160 samples (10 ms frames, centred with reflect
padding), the power spectrum through librosa's Slaney-style mel filter bank, log10, clamped to
8 decades below the maximum, scaled as `(log + 4) / 4`. The last frame is dropped, as Whisper
does. Kept here instead of importing faster-whisper, whose package import pulls in PyAV and
huggingface_hub (~25 MB resident, and hub-download code the gateway never runs).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

N_FFT, HOP = 400, 160


@lru_cache(maxsize=4)
def mel_filters(n_mels: int, sample_rate: int = 16000, n_fft: int = N_FFT) -> np.ndarray:
    """librosa.filters.mel(sr, n_fft, n_mels) with htk=False, norm='slaney': (n_mels, n_fft//2+1)."""
    fft_freqs = np.fft.rfftfreq(n=n_fft, d=1.0 / sample_rate)
    f_sp, min_log_hz = 200.0 / 3, 1000.0
    min_log_mel, logstep = min_log_hz / f_sp, np.log(6.4) / 27.0
    max_hz = sample_rate / 2
    max_mel = min_log_mel + np.log(max_hz / min_log_hz) / logstep
    mels = np.linspace(0.0, max_mel, n_mels + 2)
    freqs = f_sp * mels
    log_region = mels >= min_log_mel
    freqs[log_region] = min_log_hz * np.exp(logstep * (mels[log_region] - min_log_mel))
    fdiff = np.diff(freqs)
    ramps = freqs[:, None] - fft_freqs[None, :]
    lower = -ramps[:-2] / fdiff[:-1, None]
    upper = ramps[2:] / fdiff[1:, None]
    weights = np.maximum(0.0, np.minimum(lower, upper))
    weights *= (2.0 / (freqs[2 : n_mels + 2] - freqs[:n_mels]))[:, None]
    return weights.astype(np.float32)


def log_mel(samples: np.ndarray, n_mels: int = 80) -> np.ndarray:
    """(n_mels, frames) features of 16 kHz float32 audio; 100 frames per second."""
    audio = np.pad(samples.astype(np.float32, copy=False), (0, HOP))  # as faster-whisper: one hop of zeros
    padded = np.pad(audio, (N_FFT // 2, N_FFT // 2), mode="reflect")
    frames = 1 + (padded.size - N_FFT) // HOP
    index = np.arange(N_FFT)[None, :] + HOP * np.arange(frames)[:, None]
    window = np.hanning(N_FFT + 1)[:-1].astype(np.float32)
    spectrum = np.fft.rfft(padded[index] * window, axis=1)
    power = (np.abs(spectrum[:-1]) ** 2).T.astype(np.float32)  # drop the last frame
    log_spec = np.log10(np.maximum(mel_filters(n_mels) @ power, 1e-10))
    log_spec = np.maximum(log_spec, log_spec.max() - 8.0)
    return ((log_spec + 4.0) / 4.0).astype(np.float32)
