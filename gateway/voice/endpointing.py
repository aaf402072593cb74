"""Endpointing: when did the user start and stop talking?

A pure state machine driven by audio duration (never the wall clock), so it is exact, fast and
unit-testable without sleeping. Feed it one VAD decision per window with the window's duration.

Events:
- SPEECH_START: speech lasted `min_speech_ms` (a cough or click shorter than that is ignored).
- SPECULATE: silence has lasted `speculative_after_ms` after speech: a good moment to start
  decoding the utterance, so the result is ready when the endpoint is confirmed.
- RESUMED: speech came back after SPECULATE; the speculative result is stale.
- ENDPOINT: trailing silence reached `trailing_silence_ms`, or the utterance hit its maximum
  length. The utterance is over; the machine is idle again.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field


class Event(enum.Enum):
    SPEECH_START = "speech_start"
    SPECULATE = "speculate"
    RESUMED = "resumed"
    ENDPOINT = "endpoint"


class State(enum.Enum):
    IDLE = "idle"
    SPEECH = "speech"


@dataclass
class Endpointer:
    min_speech_ms: float = 150
    trailing_silence_ms: float = 500
    speculative_after_ms: float = 120
    max_utterance_ms: float = 20_000

    state: State = field(default=State.IDLE, init=False)
    speech_run_ms: float = field(default=0.0, init=False)  # consecutive speech while idle
    silence_ms: float = field(default=0.0, init=False)  # trailing silence while in speech
    utterance_ms: float = field(default=0.0, init=False)
    speculated: bool = field(default=False, init=False)
    forced: bool = field(default=False, init=False)  # last ENDPOINT came from max length

    def push(self, is_speech: bool, duration_ms: float) -> list[Event]:
        if self.state is State.IDLE:
            return self._idle(is_speech, duration_ms)
        return self._speech(is_speech, duration_ms)

    def reset(self) -> None:
        self.state = State.IDLE
        self.speech_run_ms = self.silence_ms = self.utterance_ms = 0.0
        self.speculated = False

    def _idle(self, is_speech: bool, duration_ms: float) -> list[Event]:
        if not is_speech:
            self.speech_run_ms = 0.0
            return []
        self.speech_run_ms += duration_ms
        if self.speech_run_ms < self.min_speech_ms:
            return []
        self.state = State.SPEECH
        self.utterance_ms = self.speech_run_ms
        self.speech_run_ms = self.silence_ms = 0.0
        self.speculated = self.forced = False
        return [Event.SPEECH_START]

    def _speech(self, is_speech: bool, duration_ms: float) -> list[Event]:
        events: list[Event] = []
        self.utterance_ms += duration_ms
        if is_speech:
            self.silence_ms = 0.0
            if self.speculated:
                self.speculated = False
                events.append(Event.RESUMED)
        else:
            self.silence_ms += duration_ms
            if not self.speculated and self.silence_ms >= self.speculative_after_ms:
                self.speculated = True
                events.append(Event.SPECULATE)
            if self.silence_ms >= self.trailing_silence_ms:
                return self._end(events, forced=False)
        if self.utterance_ms >= self.max_utterance_ms:
            return self._end(events, forced=True)
        return events

    def _end(self, events: list[Event], forced: bool) -> list[Event]:
        self.reset()
        self.forced = forced
        events.append(Event.ENDPOINT)
        return events
