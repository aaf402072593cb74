"""Echo-proof barge-in (`listen.echo_check`): is the utterance heard the box's own reply coming back?

One conversation's guard. The Speaker's send goes through `tap`, so the reply audio sent is kept as
the echo reference (gateway/voice/echo.py). While a reply plays (and for ECHO_TAIL_MS after it
ended), speech the VAD hears is first compared with that reference (`speech_started`); the box's
own echo is no speech of the user: no barge-in, no turn. It is compared again every
ECHO_RECHECK_MS of audio while it lasts (`heard`), so a person talking over it still barges in.
Between utterances the guard follows the microphone's noise level, against which a quiet echo is
told from a voice (`EchoReference.explains`). Positions are the listener's audio time in ms.
"""

from __future__ import annotations

import asyncio
import time

import numpy as np

from firmware_protocol import AudioChunk, Message
from gateway.config.listen import ListenConfig
from gateway.voice.echo import EchoReference
from gateway.voice.listen_mode import ListenMode
from gateway.voice.listener import ASR_RATE, Listener
from gateway.voice.speaker import Send

ECHO_WINDOW_MS = 250  # the microphone audio compared with the reply
ECHO_RECHECK_MS = 90  # how often an echo-like utterance is compared again
ECHO_TAIL_MS = 1500  # the echo check stays on this long after a reply ended (the box's buffer, the room)


class EchoGuard:
    def __init__(self, listener: Listener, listen: ListenMode, cfg: ListenConfig, out_rate: int) -> None:
        """`listener` is the conversation's (its audio and position), `listen` its listen mode (is a
        reply playing?); `out_rate` the sample rate of the reply audio sent to the device."""
        self._listener = listener
        self._listen = listen
        self._similarity = cfg.echo_similarity
        self._echo = EchoReference(out_rate) if cfg.echo_check else None
        self.suspect = False  # the current utterance sounds like the reply's own echo so far
        self._checked_ms = 0.0
        self._reply_end_ms: float | None = None  # mic position when the last reply ended
        self._noise: float | None = None  # the microphone's power between utterances (per sample)

    def tap(self, send: Send) -> Send:
        """The Speaker's send, its reply audio also kept as the echo reference (not a turn's events)."""
        echo = self._echo
        if echo is None:
            return send

        async def tapped(message: Message) -> None:
            if isinstance(message, AudioChunk):
                echo.played(message.data, time.monotonic())
            await send(message)

        return tapped

    async def speech_started(self, audio_ms: float) -> bool:
        """The VAD heard speech start at `audio_ms`: is it the reply's echo (so far)?"""
        self._checked_ms = audio_ms
        self.suspect = await self._is_echo()
        return self.suspect

    async def heard(self, samples: np.ndarray) -> bool:
        """After each piece of microphone audio: True when an utterance taken for the echo turns out
        to be a voice over it (just now); between utterances the room's noise level is followed."""
        if self.suspect and self._listener.in_speech:
            return await self._recheck()
        if not self._listener.in_speech and samples.size:
            power = float(np.mean(samples.astype(np.float64) ** 2))  # falls at once, rises slowly
            self._noise = power if self._noise is None or power < self._noise else 0.98 * self._noise + 0.02 * power
        return False

    def utterance_ended(self) -> bool:
        """The utterance is over: was it the reply's own echo from start to end (nobody spoke)?"""
        was, self.suspect = self.suspect, False
        return was

    def forget(self) -> None:
        """The current utterance is the user's after all (a wake word in it)."""
        self.suspect = False

    def reply_ended(self, at_ms: float) -> None:
        """A reply stopped playing at microphone position `at_ms`: the check stays on ECHO_TAIL_MS more."""
        self._reply_end_ms = at_ms

    async def _is_echo(self) -> bool:
        """Does the microphone's last ECHO_WINDOW_MS sound like the reply being played (or just played)?"""
        echo = self._echo
        if echo is None or echo.empty:
            return False
        end = self._reply_end_ms
        if not self._listen.replying and (end is None or self._listener.position_ms - end > ECHO_TAIL_MS):
            return False
        window = self._listener.utterance_audio()[-ECHO_WINDOW_MS * ASR_RATE // 1000:]
        return await asyncio.to_thread(echo.explains, window, self._similarity, self._noise)

    async def _recheck(self) -> bool:
        """Still only the echo? Checked every ECHO_RECHECK_MS of audio; True when a voice is over it."""
        now = self._listener.position_ms
        if now - self._checked_ms < ECHO_RECHECK_MS:
            return False
        self._checked_ms = now
        if await self._is_echo():
            return False
        self.suspect = False
        return True
