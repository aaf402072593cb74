"""Echo-proof barge-in (`listen.echo_check`): is the utterance heard the box's own reply coming back?

One conversation's guard. The Speaker's send goes through `tap`, so the reply audio sent is kept as
the echo reference (gateway/voice/echo.py). While a reply plays (and for ECHO_TAIL_MS after it
ended), speech the VAD hears is first compared with that reference (`speech_started`); the box's
own echo is no speech of the user: no barge-in, no turn. It is compared again every
ECHO_RECHECK_MS of audio while it lasts (`heard`), so a person talking over it still barges in.
Between utterances the guard follows the microphone's noise level, against which a quiet echo is
told from a voice (`EchoReference.verdict`). Positions are the listener's audio time in ms.

The reference is laid out on the box's clock: the seconds of microphone audio received (`received`),
the box's own sample clock as the gateway sees it (a box plays and records on one clock; the
gateway's wall clock runs on when its loop is late, the box's stream does not seem to).

When the correlation is inconclusive (`Verdict.UNSURE`: a voice quieter than the echo, or an echo
the alignment misses) the utterance so far is transcribed (one check at a time, off the event
loop, while the audio goes on) and its words compared with the words being played (`playing`: the
sentences of the reply): mostly the reply's words, or none, is the echo; other words are a voice.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import re
from collections import deque
from collections.abc import Awaitable, Callable

import numpy as np

from firmware_protocol import AudioChunk, Message
from gateway.config.listen import ListenConfig
from gateway.voice.echo import EchoReference, Verdict
from gateway.voice.listen_mode import ListenMode
from gateway.voice.listener import ASR_RATE, Listener
from gateway.voice.speaker import Send

ECHO_WINDOW_MS = 250  # the microphone audio compared with the reply
ECHO_RECHECK_MS = 90  # how often an echo-like utterance is compared again
ECHO_TAIL_MS = 1500  # the echo check stays on this long after a reply ended (the box's buffer, the room)
NOISE_KNOWN_S = 0.5  # the room's noise level is known after this much microphone audio between utterances
# (until then a window is compared with the quietest piece of microphone audio heard so far)
PLAYED_SENTENCES = 3  # the words compared with an UNSURE utterance's: the last sentences played
ECHO_WORDS = 0.5  # an UNSURE utterance whose heard words are at least this share of the reply's is its echo

log = logging.getLogger(__name__)
_WORD = re.compile(r"[^\W_]+")

Transcribe = Callable[[np.ndarray], Awaitable[str]]


class Ended(enum.Enum):
    """What an utterance was, as far as the echo is concerned (`EchoGuard.utterance_ended`)."""

    SPEECH = "speech"  # never taken for the echo
    ECHO = "echo"  # the reply's own echo from start to end: nobody spoke
    VOICE_AT_END = "voice at end"  # taken for the echo until its words, checked at its end, were not the reply's


def words_of(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def is_echo_of(heard: str, played: list[str]) -> bool:
    """Are the words heard (mostly) the reply's own? No words heard: nothing of a person's."""
    words = words_of(heard)
    if not words:
        return True
    reply = set(played)
    return sum(w in reply for w in words) >= ECHO_WORDS * len(words)


class EchoGuard:
    def __init__(self, listener: Listener, listen: ListenMode, cfg: ListenConfig, out_rate: int,
                 transcribe: Transcribe, who: str = "") -> None:
        """`listener` is the conversation's (its audio and position), `listen` its listen mode (is a
        reply playing?); `out_rate` the sample rate of the reply audio sent to the device;
        `transcribe` the ASR (16 kHz float32 -> text) for the words of an UNSURE utterance."""
        self._listener = listener
        self._listen = listen
        self._transcribe = transcribe
        self._who = who
        self._mic_s = 0.0  # microphone audio received: the box's clock
        self._played: deque[list[str]] = deque(maxlen=PLAYED_SENTENCES)  # the words of the last sentences
        self._words: asyncio.Task[bool] | None = None  # an UNSURE utterance transcribed: is it a voice?
        self._similarity = cfg.echo_similarity
        self._echo = EchoReference(out_rate) if cfg.echo_check else None
        self.suspect = False  # the current utterance sounds like the reply's own echo so far
        self._checked_ms = 0.0
        self._reply_end_ms: float | None = None  # mic position when the last reply ended
        self._noise: float | None = None  # the microphone's power between utterances (per sample)
        self._quiet_s = 0.0  # microphone audio heard between utterances so far
        self._floor: float | None = None  # the quietest piece of microphone audio so far (power per sample)

    def tap(self, send: Send) -> Send:
        """The Speaker's send, its reply audio also kept as the echo reference (not a turn's events)."""
        echo = self._echo
        if echo is None:
            return send

        async def tapped(message: Message) -> None:
            if isinstance(message, AudioChunk):
                echo.played(message.data, self._mic_s)
            await send(message)

        return tapped

    def received(self, seconds: float) -> None:
        """Microphone audio came in (before it is heard): the box's clock moves on."""
        self._mic_s += seconds

    def playing(self, text: str) -> None:
        """A sentence of the reply begins to play: its words are what its echo says."""
        self._played.append(words_of(text))

    async def speech_started(self, audio_ms: float) -> bool:
        """The VAD heard speech start at `audio_ms`: is it the reply's echo (so far)?"""
        self._checked_ms = audio_ms
        self._cancel_words()
        self.suspect = await self._is_echo() is not Verdict.VOICE
        return self.suspect

    async def heard(self, samples: np.ndarray, seconds: float) -> bool:
        """After each piece of microphone audio (`seconds` long): True when an utterance taken for the
        echo turns out to be a voice over it (just now); between utterances the room's noise level is
        followed."""
        power = float(np.dot(samples, samples)) / samples.size if samples.size else None
        if power is not None and (self._floor is None or power < self._floor):
            self._floor = power
        if self.suspect and self._listener.in_speech:
            if self._words is not None and self._words.done():
                words, self._words = self._words, None
                if not words.cancelled() and words.exception() is None and words.result():
                    self.suspect = False
                    return True
            return await self._recheck()
        if not self._listener.in_speech and power is not None:  # falls at once, rises slowly
            self._noise = power if self._noise is None or power < self._noise else 0.98 * self._noise + 0.02 * power
            self._quiet_s += seconds
        return False

    async def utterance_ended(self) -> Ended:
        """The utterance is over: was it the reply's own echo from start to end (nobody spoke)? Taken
        for the echo with its words still being checked: their verdict is awaited."""
        was, self.suspect = self.suspect, False
        words, self._words = self._words, None
        if not was:
            if words is not None:
                words.cancel()
                words.add_done_callback(_retrieve)
            return Ended.SPEECH
        if words is not None:
            try:
                if await words:
                    return Ended.VOICE_AT_END
            except Exception:  # the ASR failed (logged by the runner): the correlation's verdict stands
                log.warning("%s: echo words check failed: taken for the echo", self._who)
        return Ended.ECHO

    def forget(self) -> None:
        """The current utterance is the user's after all (a wake word in it)."""
        self.suspect = False
        self._cancel_words()

    async def close(self) -> None:
        """The running words check cancelled and awaited."""
        words, self._words = self._words, None
        if words is not None:
            words.cancel()
            await asyncio.gather(words, return_exceptions=True)

    def reply_cut(self) -> None:
        """The reply was cut (a barge-in: its stream's AudioStop ABORTED): the box drops the audio it had
        queued, so does the reference."""
        if self._echo is not None:
            self._echo.stopped(self._mic_s)

    def reply_ended(self, at_ms: float) -> None:
        """A reply stopped playing at microphone position `at_ms`: the check stays on ECHO_TAIL_MS more."""
        self._reply_end_ms = at_ms

    async def _is_echo(self) -> Verdict:
        """Does the microphone's last ECHO_WINDOW_MS sound like the reply being played (or just played)?
        An UNSURE verdict starts the words check (if none runs)."""
        echo = self._echo
        if echo is None or echo.empty:
            return Verdict.VOICE
        end = self._reply_end_ms
        if not self._listen.replying and (end is None or self._listener.position_ms - end > ECHO_TAIL_MS):
            return Verdict.VOICE
        window = self._listener.utterance_audio()[-ECHO_WINDOW_MS * ASR_RATE // 1000:]
        # Not the onset of a first utterance: until the noise is known, the quietest piece heard (a
        # pause in the echo is the room's noise: compared with nothing, it had counted as a voice)
        noise = self._noise if self._quiet_s >= NOISE_KNOWN_S else self._floor
        check = await asyncio.to_thread(echo.check, window, self._similarity, noise, self._mic_s)
        verdict = check.verdict
        if verdict is Verdict.VOICE:
            log.info("%s: echo check at %.2f s: a voice over the reply (%s)", self._who,
                     self._listener.position_ms / 1000, check.describe())
        if verdict is Verdict.UNSURE and self._words is None:
            self._words = asyncio.create_task(self._voice_by_words(self._listener.utterance_audio()),
                                              name=f"echo words {self._who}")
        return verdict

    async def _recheck(self) -> bool:
        """Still only the echo? Checked every ECHO_RECHECK_MS of audio; True when a voice is over it."""
        now = self._listener.position_ms
        if now - self._checked_ms < ECHO_RECHECK_MS:
            return False
        self._checked_ms = now
        if await self._is_echo() is not Verdict.VOICE:
            return False
        self.suspect = False
        self._cancel_words()
        return True

    async def _voice_by_words(self, audio: np.ndarray) -> bool:
        """The UNSURE utterance's words: True (a voice) unless they are mostly the reply's own."""
        heard = await self._transcribe(audio)
        played = [w for sentence in self._played for w in sentence]
        echo = is_echo_of(heard, played)
        log.info("%s: echo check unsure: heard %r, %s", self._who, heard,
                 "the reply's own words (its echo)" if echo else "not the reply's words (a voice over it)")
        return not echo

    def _cancel_words(self) -> None:
        if self._words is not None:
            self._words.cancel()  # its ASR call finishes on its thread; the result is dropped
            self._words.add_done_callback(_retrieve)
            self._words = None


def _retrieve(task: asyncio.Task[bool]) -> None:
    if not task.cancelled():
        task.exception()
