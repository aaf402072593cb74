"""A simulated box whose microphone hears its own speaker (for `gateway bench-wake` and the tests).

The reply audio it receives is played in order on the box's own clock (one speaker sample per
microphone sample streamed; when nothing is queued it plays silence and resumes where it was, as a
real box's buffer underruns), and comes back into its microphone delayed, attenuated and with room
noise; a person's voice may be mixed in from a given microphone sample. An aborted stream stops
playing at once; `aborted_at` is the microphone sample at which the abort arrived.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import numpy as np

from firmware_protocol import AudioChunk, AudioStop, Message, ReplyText, StopReason
from gateway.audio.pcm import float_to_s16le, int16_to_float

RATE = 16000


class EchoBox:
    def __init__(self, forward: Callable[[Message], Awaitable[None]], delay_ms: int, gain: float, seed: int,
                 noise_rms: float = 0.003) -> None:
        self._forward = forward
        self.delay, self.gain, self.noise_rms = RATE * delay_ms // 1000, gain, noise_rms
        self.rng = np.random.default_rng(seed)
        self.queued = np.zeros(0, np.float32)  # received, not yet played
        self.speaker = np.zeros(0, np.float32)  # what the speaker played, one sample per microphone sample
        self.start: int | None = None  # microphone sample at which the box began to play
        self.mic = 0  # samples streamed so far
        self.aborted_at: int | None = None
        self.replies_ended = 0

    async def send(self, message: Message) -> None:
        """What the gateway sends the box (its speaker output is 16 kHz PCM)."""
        if isinstance(message, AudioChunk):
            if self.start is None:
                self.start = self.mic
            self.queued = np.concatenate([self.queued, int16_to_float(np.frombuffer(message.data, "<i2"))])
        elif isinstance(message, AudioStop) and message.reason == StopReason.ABORTED:
            self.aborted_at = self.mic
            self.queued = self.queued[:0]  # it stops at once
        elif isinstance(message, ReplyText) and message.final:
            self.replies_ended += 1
        await self._forward(message)

    def next_mic(self, n: int, voice: np.ndarray | None = None, voice_at: int = 0) -> np.ndarray:
        played = np.zeros(n, np.float32)
        take = min(n, self.queued.size)
        played[:take], self.queued = self.queued[:take], self.queued[take:]
        self.speaker = np.concatenate([self.speaker, played])
        idx = np.arange(self.mic, self.mic + n) - self.delay
        ok = idx >= 0
        out = np.zeros(n, np.float32)
        out[ok] = self.speaker[idx[ok]] * self.gain
        out += self.rng.normal(0, self.noise_rms, n).astype(np.float32)
        if voice is not None:
            j = np.arange(self.mic, self.mic + n) - voice_at
            inside = (j >= 0) & (j < voice.size)
            out[inside] += voice[j[inside]]
        self.mic += n
        return out


async def stream(on_audio: Callable[[bytes], Awaitable[None]], box: EchoBox, seconds: float,
                 voice: np.ndarray | None = None, voice_at: int = 0,
                 done: Callable[[], bool] = lambda: False) -> None:
    """The box's microphone in real time: 20 ms chunks paced by the clock, like a device."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    for k in range(int(seconds * 50)):
        await on_audio(float_to_s16le(box.next_mic(RATE // 50, voice, voice_at)))
        if done():
            return
        await asyncio.sleep(max(0.0, started + (k + 1) / 50 - loop.time()))
