"""Listen mode: is a heard utterance a turn? A pure state machine driven by audio time.

Every position is the device's microphone stream position in ms (gateway/voice/listener.py), never
the wall clock, so the machine is exact and unit-testable without sleeping.

Modes (`listen.mode`, docs/CONFIG.md):
- `always`: every utterance is a turn (the behaviour without a wake word).
- `ptt`: turns only while the box's button is held: between its AudioStart and AudioStop (xiaozhi:
  `listen start` ... `listen stop`); every utterance in there is a turn, its AudioStop ends one.
  Microphone audio outside is not listened to (`hears`).
- `wake`: a turn needs the wake word. The words after it in the same breath are the question
  ("okay nabu, what time is it": the turn hears the audio after the detection). A wake word alone
  opens a window of `wake_window_ms` in which the next utterance is the question.
- `follow-up`: `wake`, and after a reply has played to its end a window of `follow_up_ms` opens in
  which the user answers without the wake word.

A wake word heard while a reply plays is a barge-in. A transcript that is only a stop word
("stop", "be quiet", "停", "别说了", ...) never becomes a turn: it ends the playing reply.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field

from gateway.config.listen import ListenModeName


class Listening(enum.IntEnum):
    """What the box is told (ListenState) and the screens show."""

    ASLEEP = 0  # waiting for the wake word
    LISTENING = 1  # the next utterance is a turn without the wake word (always, ptt, follow-up window)
    WOKEN = 2  # the wake word was heard: the question follows


class Verdict(enum.Enum):
    TURN = "turn"  # answer the utterance (from `cut_ms` on)
    CHECK_STOP = "check-stop"  # not addressed, but a reply plays: transcribe it, act only on a stop word
    DROP = "drop"  # not addressed: no turn


@dataclass(frozen=True)
class Outcome:
    verdict: Verdict
    cut_ms: float = 0.0  # where the question starts, in ms from the utterance's first sample


BARE_WAKE_MS = 300.0  # less speech than this after the wake word: the wake word alone


@dataclass
class ListenMode:
    mode: ListenModeName
    wake_window_ms: float = 5000.0
    follow_up_ms: float = 6000.0

    state: Listening = field(init=False)
    open_until_ms: float = field(default=0.0, init=False)  # end of the woken / follow-up window
    wake_at_ms: float | None = field(default=None, init=False)  # the last detection not yet used by a turn
    replying: bool = field(default=False, init=False)
    held: bool = field(default=False, init=False)  # ptt: between the box's AudioStart and AudioStop

    def __post_init__(self) -> None:
        self.state = Listening.ASLEEP if self.needs_wake_word else Listening.LISTENING

    @property
    def needs_wake_word(self) -> bool:
        return self.mode in ("wake", "follow-up")

    # ---- inputs ---------------------------------------------------------------------------
    def mic_opened(self) -> None:
        """The box started its microphone stream (AudioStart: the ptt button is pressed)."""
        self.held = True

    def mic_closed(self) -> None:
        """The box ended its microphone stream (AudioStop: the button is released)."""
        self.held = False

    @property
    def hears(self) -> bool:
        """Is microphone audio listened to now? Always, except in `ptt` outside the button's hold."""
        return self.mode != "ptt" or self.held

    def advance(self, now_ms: float) -> Listening | None:
        """Audio time passed: a window that has run out closes. The new state, if it changed."""
        if self.state is not Listening.ASLEEP and self.needs_wake_word and now_ms >= self.open_until_ms:
            return self._set(Listening.ASLEEP)
        return None

    def wake(self, at_ms: float) -> Listening | None:
        """The wake word was detected at `at_ms` (the end of the word). Ignored in always/ptt."""
        if not self.needs_wake_word:
            return None
        self.wake_at_ms = at_ms
        self.open_until_ms = at_ms + self.wake_window_ms
        return self._set(Listening.WOKEN)

    def is_open(self, at_ms: float) -> bool:
        """Would speech starting at `at_ms` be addressed to the gateway without a new wake word?"""
        return not self.needs_wake_word or (self.state is not Listening.ASLEEP and at_ms < self.open_until_ms)

    def utterance(self, start_ms: float, speech_end_ms: float) -> Outcome:
        """An utterance ended: its first sample at `start_ms`, its last speech at `speech_end_ms`."""
        if not self.needs_wake_word:
            return Outcome(Verdict.TURN)
        wake = self.wake_at_ms
        if wake is not None and start_ms <= wake <= speech_end_ms + 1:
            self.wake_at_ms = None
            if speech_end_ms - wake < BARE_WAKE_MS:  # the wake word alone: the question comes next
                self.open_until_ms = max(self.open_until_ms, speech_end_ms + self.wake_window_ms)
                return Outcome(Verdict.DROP)
            self._close()
            return Outcome(Verdict.TURN, cut_ms=wake - start_ms)
        if self.is_open(start_ms):
            self._close()
            return Outcome(Verdict.TURN)
        return Outcome(Verdict.CHECK_STOP if self.replying else Verdict.DROP)

    def reply_started(self) -> None:
        self.replying = True

    def reply_ended(self, at_ms: float, aborted: bool) -> Listening | None:
        """A reply stopped playing. After one played to its end, `follow-up` opens its window."""
        self.replying = False
        if self.mode == "follow-up" and not aborted and self.follow_up_ms > 0:
            self.open_until_ms = at_ms + self.follow_up_ms
            return self._set(Listening.LISTENING)
        return None

    # ---- internals ------------------------------------------------------------------------
    def _close(self) -> None:
        """A turn took the window: the next one needs the wake word again (or a follow-up window)."""
        self.open_until_ms = 0.0

    def _set(self, state: Listening) -> Listening | None:
        if state is self.state:
            return None
        self.state = state
        return state


_PUNCTUATION = re.compile(r"[\s.,!?;:'\"\-…。，！？、；：“”‘’（）()]+")


def _normalised(text: str) -> str:
    return _PUNCTUATION.sub(" ", text.lower().replace("'", "")).strip()


@dataclass(frozen=True)
class StopWords:
    """A transcript that is only a stop word (and polite filler around it) ends a reply."""

    words: tuple[str, ...]
    _set: frozenset[str] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_set", frozenset(_normalised(w) for w in self.words))

    def matches(self, transcript: str) -> bool:
        text = _normalised(transcript)
        for filler in ("please ", "okay ", "ok ", "hey ", "now "):
            text = text.removeprefix(filler)
        for filler in (" please", " now"):
            text = text.removesuffix(filler)
        joined = text.replace(" ", "")
        candidates = {text, joined, joined.removesuffix("吧"), joined.removesuffix("吧").removesuffix("啊")}
        return bool(text) and not candidates.isdisjoint(self._set)
