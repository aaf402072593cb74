"""Listener: turns a device's microphone stream into utterances.

Resamples the input to 16 kHz, cuts it into VAD windows, asks the VAD (off the event loop) and
drives the endpointing state machine. It keeps the audio of the current utterance, including a
short pre-roll before speech was confirmed so the first syllable is not clipped. With a wake-word
detector (listen.mode wake / follow-up) the same 16 kHz audio goes to it too, in the same executor
hop as the VAD, and its detections come back as `Woke`, in audio order with the VAD's events.
"""

from __future__ import annotations

import asyncio
import math
from collections import deque
from dataclasses import dataclass

import numpy as np

from gateway.audio.pcm import StreamResampler
from gateway.engines.base import VadEngine
from gateway.engines.runner import EngineRunner
from gateway.engines.wake_word import WakeWordDetector, pcm16
from gateway.voice.endpointing import Endpointer, Event

ASR_RATE = 16000


@dataclass(frozen=True)
class Heard:
    event: Event
    audio_ms: float  # position in the input stream (ms of audio received) when it happened


@dataclass(frozen=True)
class Woke:
    word: str  # the wake-word model's id
    audio_ms: float  # position in the input stream where it was detected (the end of the word)


def _level_db(window: np.ndarray) -> float:
    """A window's level (dB of its mean power; the endpointer's relative_drop_db compares them)."""
    return 10.0 * math.log10(float(np.dot(window, window)) / max(1, window.size) + 1e-10)


class Listener:
    def __init__(
        self,
        runner: EngineRunner,
        detector: VadEngine,
        endpointer: Endpointer,
        in_rate: int,
        preroll_ms: int = 300,
        wake: WakeWordDetector | None = None,
    ) -> None:
        self._runner = runner
        self._vad = detector
        self._ep = endpointer
        self._resampler = StreamResampler(in_rate, ASR_RATE)
        self._win = detector.window_samples
        self._pending = np.zeros(0, dtype=np.float32)
        self._preroll: deque[np.ndarray] = deque(maxlen=max(1, preroll_ms * ASR_RATE // 1000 // self._win))
        self._utterance: list[np.ndarray] = []
        self._position_ms = 0.0
        self._start_ms = 0.0  # where the current utterance's audio (pre-roll included) begins
        self._wake = wake
        self.in_speech = False

    @property
    def position_ms(self) -> float:
        return self._position_ms

    @property
    def utterance_start_ms(self) -> float:
        """The stream position of the current (or last) utterance's first sample, pre-roll included."""
        return self._start_ms

    @property
    def silence_ms(self) -> float:
        """Trailing silence counted so far in the current utterance."""
        return self._ep.silence_ms

    def utterance_audio(self) -> np.ndarray:
        """A copy of the current utterance's audio (16 kHz float32)."""
        return np.concatenate(self._utterance) if self._utterance else np.zeros(0, np.float32)

    async def feed(self, samples: np.ndarray, last: bool = False) -> list[Heard | Woke]:
        """Add input samples (device rate, float32). Returns what was heard, in order."""
        audio = self._resampler.push(samples, last=last)
        if audio.size:
            self._pending = np.concatenate([self._pending, audio])
        n = len(self._pending) // self._win
        windows = [self._pending[i * self._win : (i + 1) * self._win] for i in range(n)]
        self._pending = self._pending[n * self._win :]
        if self._wake is None:  # no second hop to wait for: no tasks of a gather (two per chunk)
            decisions, woke = await self._decide(windows), []
        else:
            decisions, woke = await asyncio.gather(self._decide(windows), self._wake_words(audio))
        heard: list[Heard | Woke] = []
        window_ms = 1000.0 * self._win / ASR_RATE
        levels = self._ep.relative_drop_db > 0  # a window's level is only compared with relative_drop_db on
        for window, speech in zip(windows, decisions):
            self._position_ms += window_ms
            if self.in_speech:
                self._utterance.append(window)
            else:
                self._preroll.append(window)
            for event in self._ep.push(speech, window_ms, _level_db(window) if levels else None):
                heard.append(Heard(event, self._position_ms))
                if event is Event.SPEECH_START:
                    self.in_speech = True
                    self._start_ms = self._position_ms - window_ms * len(self._preroll)
                    self._utterance = list(self._preroll)
                    self._preroll.clear()
                elif event is Event.ENDPOINT:
                    self.in_speech = False
        if woke:
            heard = sorted(heard + woke, key=lambda h: h.audio_ms)  # stable: a VAD event first at a tie
        return heard

    async def _decide(self, windows: list[np.ndarray]) -> list[bool]:
        return await self._runner.vad_windows(self._vad, windows) if windows else []

    async def _wake_words(self, audio: np.ndarray) -> list[Woke]:
        if self._wake is None or not audio.size:
            return []
        return [Woke(d.word, d.audio_ms) for d in await self._runner.wake_words(self._wake, pcm16(audio))]

    def end_utterance(self) -> None:
        """Forget the finished utterance's audio (after it has been handed to ASR)."""
        self._utterance = []

    def force_endpoint(self) -> bool:
        """The device closed its audio stream: end a running utterance now. True if one was running."""
        running = self.in_speech
        self._ep.reset()
        self.in_speech = False
        self._vad.reset()
        return running
