"""Endpointing: when did the user start and stop talking?

A pure state machine driven by audio duration (never the wall clock), so it is exact, fast and
unit-testable without sleeping. Feed it one VAD decision per window with the window's duration.

Events:
- SPEECH_START: speech lasted `min_speech_ms` (a cough or click shorter than that is ignored).
- SPECULATE: silence has lasted `speculative_after_ms` after speech: a good moment to start
  decoding the utterance, so the result is ready when the endpoint is confirmed (the VAD's
  silence: in babble there is none, and the utterance is decoded at its endpoint).
- RESUMED: speech came back after SPECULATE; the speculative result is stale.
- ENDPOINT: trailing silence reached `trailing_silence_ms`, or the utterance hit its maximum
  length. The utterance is over; the machine is idle again.

Relative level (`relative_drop_db`, off at 0): background speech (a TV, other people talking) is
"speech" to the VAD, so without it the trailing silence never comes in babble. With it, `push`
takes each window's level (dB) too; the machine tracks the utterance's own speech level (the
`_LEVEL_PERCENTILE` of the windows it counted as speech) and counts a window the VAD calls speech
as silence when it is `relative_drop_db` or more below that level: the talker near the box stops,
the babble 5-20 dB under him stays, and the endpoint comes after `trailing_silence_ms` +
`_QUIET_EXTRA_MS` of it (the extra keeps the talker's own quiet words, a falling sentence end
included, from ending the question: with 0.3 s piper's "... this morning?" was cut), or
as before after `trailing_silence_ms` of the VAD's own silence, whichever comes first.
A loud room (a TV as loud as the talker's quiet words, ~5 dB under him) leaves few windows that
far under the level; so a second, slower rule counts windows `_LOUD_ROOM_DB` less far under it
(5 dB with the default 8) and ends the utterance after `trailing_silence_ms` + `_LOUD_ROOM_EXTRA_MS`
of those: ~2.8 s after the question in such a room instead of at `max_utterance_s`, while the
talker's own quiet stretches stay well under it (the longest measured in 400 clean syntheses:
docs/CONFIG.md, `vad.relative_drop_db`).
Until `_LEVEL_MIN_MS` of speech has been counted there is no level yet and nothing is quiet.
After an endpoint that such quiet windows brought, the level is kept: while the VAD goes on
hearing speech, only windows within `relative_drop_db` of it can start the next utterance (the
babble after the question is not a new one; in a loud room it may be, as without the slower
rule); `trailing_silence_ms` of VAD silence forgets it.
"""

from __future__ import annotations

import bisect
import enum
from dataclasses import dataclass, field

_LEVEL_PERCENTILE = 0.9  # the utterance's speech level: this quantile of its speech windows' levels
_LEVEL_MIN_MS = 600.0  # speech counted before the level is trusted
_QUIET_EXTRA_MS = 1300.0  # a trailing silence with quiet windows in it must be this much longer (see the docstring)
_LOUD_ROOM_DB = 3.0  # the slower rule's windows are this much less far under the level (see the docstring)
_LOUD_ROOM_EXTRA_MS = 2500.0  # ... and must last trailing_silence_ms + this


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
    relative_drop_db: float = 0.0  # 0 = off; else a VAD-speech window this far under the level is silence

    state: State = field(default=State.IDLE, init=False)
    speech_run_ms: float = field(default=0.0, init=False)  # consecutive speech while idle
    silence_ms: float = field(default=0.0, init=False)  # trailing silence while in speech (quiet windows too)
    vad_silence_ms: float = field(default=0.0, init=False)  # the VAD's own trailing silence (speculation)
    utterance_ms: float = field(default=0.0, init=False)
    speculated: bool = field(default=False, init=False)
    forced: bool = field(default=False, init=False)  # last ENDPOINT came from max length
    levels: list[float] = field(default_factory=list, init=False)  # sorted dB of the counted speech windows
    level_ms: float = field(default=0.0, init=False)  # audio behind `levels`
    quiet_in_silence: bool = field(default=False, init=False)  # the trailing silence has quiet windows
    soft_ms: float = field(default=0.0, init=False)  # trailing windows under the loud-room rule's drop, or silence
    carried_db: float | None = field(default=None, init=False)  # the last utterance's level (see above)
    idle_silence_ms: float = field(default=0.0, init=False)  # VAD silence while a level is carried

    def push(self, is_speech: bool, duration_ms: float, level_db: float | None = None) -> list[Event]:
        """One VAD decision for `duration_ms` of audio; `level_db` its level (used by relative_drop_db)."""
        if self.state is State.IDLE:
            return self._idle(is_speech, duration_ms, level_db)
        loud = soft_loud = is_speech
        if is_speech and level_db is not None and self.relative_drop_db > 0:
            level = self.speech_level_db  # (before this window counts)
            loud = self._loud(level_db, duration_ms)
            self.quiet_in_silence |= not loud
            soft_loud = level is None or level_db > level - self._loud_room_drop_db
        if soft_loud:
            self.soft_ms = 0.0
        else:
            self.soft_ms += duration_ms
        return self._speech(is_speech, loud, duration_ms)

    @property
    def _loud_room_drop_db(self) -> float:
        return max(self.relative_drop_db - _LOUD_ROOM_DB, 0.5 * self.relative_drop_db)

    @property
    def speech_level_db(self) -> float | None:
        """The current utterance's speech level, once enough speech was counted (relative_drop_db)."""
        if self.level_ms < _LEVEL_MIN_MS or not self.levels:
            return None
        return self.levels[min(len(self.levels) - 1, int(_LEVEL_PERCENTILE * len(self.levels)))]

    def _loud(self, level_db: float, duration_ms: float) -> bool:
        """Whether a VAD-speech window is speech of this utterance's talker (not far under its level)."""
        level = self.speech_level_db
        if level is not None and level_db <= level - self.relative_drop_db:
            return False
        bisect.insort(self.levels, level_db)
        self.level_ms += duration_ms
        return True

    def reset(self) -> None:
        self.state = State.IDLE
        self.speech_run_ms = self.silence_ms = self.vad_silence_ms = self.utterance_ms = self.soft_ms = 0.0
        self.speculated = False
        self.levels = []
        self.level_ms = 0.0
        self.carried_db = None

    def _idle(self, is_speech: bool, duration_ms: float, level_db: float | None) -> list[Event]:
        if self.carried_db is not None:
            if not is_speech:
                self.idle_silence_ms += duration_ms
                if self.idle_silence_ms >= self.trailing_silence_ms:
                    self.carried_db = None
            else:
                self.idle_silence_ms = 0.0
                if level_db is not None and level_db <= self.carried_db - self.relative_drop_db:
                    is_speech = False  # the background the last utterance ended in
        if not is_speech:
            self.speech_run_ms = 0.0
            self.levels = []
            self.level_ms = 0.0
            return []
        self.speech_run_ms += duration_ms
        if level_db is not None and self.relative_drop_db > 0:
            bisect.insort(self.levels, level_db)  # the speech run that starts the utterance counts
            self.level_ms += duration_ms
        if self.speech_run_ms < self.min_speech_ms:
            return []
        self.state = State.SPEECH
        self.utterance_ms = self.speech_run_ms
        self.speech_run_ms = self.silence_ms = self.vad_silence_ms = self.soft_ms = 0.0
        self.speculated = self.forced = self.quiet_in_silence = False
        self.carried_db = None
        return [Event.SPEECH_START]

    def _speech(self, vad_speech: bool, loud: bool, duration_ms: float) -> list[Event]:
        """`loud`: speech of the talker (`vad_speech` and not quiet). The speculation follows the
        VAD alone, as without the relative level (a quiet last word still goes into the
        speculative decode); the endpoint follows `loud`."""
        events: list[Event] = []
        self.utterance_ms += duration_ms
        if vad_speech:
            self.vad_silence_ms = 0.0
            if self.speculated:
                self.speculated = False
                events.append(Event.RESUMED)
        else:
            self.vad_silence_ms += duration_ms
            if not self.speculated and self.vad_silence_ms >= self.speculative_after_ms:
                self.speculated = True
                events.append(Event.SPECULATE)
        if loud:
            self.silence_ms = 0.0
            self.quiet_in_silence = False
        else:
            self.silence_ms += duration_ms
        extra = _QUIET_EXTRA_MS if self.quiet_in_silence else 0.0
        if self.vad_silence_ms >= self.trailing_silence_ms or self.silence_ms >= self.trailing_silence_ms + extra:
            return self._end(events, forced=False)
        if self.relative_drop_db > 0 and self.soft_ms >= self.trailing_silence_ms + _LOUD_ROOM_EXTRA_MS:
            self.quiet_in_silence = True  # (the loud room's windows: the level is carried)
            return self._end(events, forced=False)
        if self.utterance_ms >= self.max_utterance_ms:
            return self._end(events, forced=True)
        return events

    def _end(self, events: list[Event], forced: bool) -> list[Event]:
        carried = self.speech_level_db if self.quiet_in_silence and not forced else None
        self.reset()
        self.carried_db = carried
        self.idle_silence_ms = 0.0
        self.forced = forced
        events.append(Event.ENDPOINT)
        return events
