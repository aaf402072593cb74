"""Fake engines: deterministic, instant VAD, ASR and TTS behind the engine protocols (base.py).

They keep the protocol, session and pipeline tests (and link benchmarks) free of models while
the real pipeline runs on them: the endpointing state machine, resampling, pacing, expression.

* `FakeTts` says text in the tone code (gateway/engines/tone_code.py): `nibble_ms` per half
  byte (40 ms per ASCII character by default) at its sample rate, with one phoneme per character
  (its letter, or an IPA stand-in) whose sample counts add up to the chunk, like an aligned
  Piper voice.
* `FakeAsr` reads the tone code back: speak a sentence with `FakeTts` and it hears exactly that
  sentence, through the whole device path (resampling, int16, chunking, pre-roll). Other sound
  decodes to nothing or noise.
* `FakeVad` calls a window speech when its RMS is above a threshold: tone code or any loud block
  is speech, zeros are silence.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import numpy as np

from gateway.engines import tone_code
from gateway.engines.base import SynthChunk

ASR_RATE = 16000
_IPA_STAND_IN = {"c": "k", "q": "k", "x": "k", "j": "ʤ", "y": "j"}


class FakeVad:
    """VadEngine: speech = window RMS above `threshold` (stateless, so reset/clone are trivial)."""

    sample_rate = ASR_RATE

    def __init__(self, threshold: float = 0.02, window_samples: int = 512) -> None:
        self.threshold = threshold
        self.window_samples = window_samples

    def is_speech(self, window: np.ndarray) -> bool:
        if window.size != self.window_samples:
            raise ValueError(f"a VAD window has {self.window_samples} samples, got {window.size}")
        return float(np.sqrt(np.mean(np.square(window, dtype=np.float64)))) > self.threshold

    def reset(self) -> None: ...

    def clone(self) -> "FakeVad":
        return FakeVad(self.threshold, self.window_samples)


class FakeAsr:
    """AsrEngine: the text `FakeTts` put into the audio."""

    sample_rate = ASR_RATE
    thread_safe = True

    def transcribe(self, audio: np.ndarray, cancel: threading.Event | None = None) -> str:
        """Instant: `cancel` is not looked at."""
        return tone_code.decode(audio, self.sample_rate)


def _phoneme(ch: str) -> str:
    low = ch.lower()
    return _IPA_STAND_IN.get(low, low) if low.isalpha() else (" " if ch.isspace() else ch)


class FakeTts:
    """TtsEngine: one chunk per sentence, in the tone code, with per-character phoneme timings."""

    thread_safe = True

    def __init__(self, sample_rate: int = 22050, nibble_ms: float = 20.0) -> None:
        if nibble_ms < 15:
            raise ValueError("nibble_ms below 15 is too short for FakeAsr to read back")
        self.sample_rate = sample_rate
        self.nibble_ms = nibble_ms

    def samples_per_char(self, ch: str) -> int:
        return 2 * len(ch.encode("utf-8")) * tone_code.burst_samples(self.sample_rate, self.nibble_ms)

    def synthesize(self, text: str) -> Iterator[SynthChunk]:
        if not text.strip():
            return
        audio = tone_code.encode(text, self.sample_rate, self.nibble_ms)
        pcm = np.round(audio * 32767).astype(np.int16)
        phonemes = tuple((_phoneme(ch), self.samples_per_char(ch)) for ch in text)
        yield SynthChunk(pcm=pcm, sample_rate=self.sample_rate, phonemes=phonemes)
