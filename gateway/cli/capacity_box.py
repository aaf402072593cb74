"""A virtual voice box in conversation, as `gateway bench-capacity` and `gateway bench-cluster
--voice` run them: one connection for all its questions, its microphone streamed in real time
(silence, then a question's speech, then silence until the reply has ended), the end of input ->
first reply audio measured on the box's side."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from firmware_protocol import (AudioChunk, AudioFormat, AudioStart, Error, Hello, ReplyText, Transcript,
                               Welcome, decode, encode)
from gateway.asreval.wer import edit_distance
from gateway.audio.pcm import float_to_s16le
from gateway.brain.text import normalize
from gateway.links.device_side import open_device

RATE = 16000
CHUNK_MS = 40


@dataclass
class Turn:
    question: str
    latency_ms: float | None = None  # the box's input end -> first reply audio
    transcript: str = ""
    error: str = ""


@dataclass
class Box:
    """One virtual voice box in conversation (one connection for all its questions)."""

    url: str
    box_id: str
    turns: list[Turn] = field(default_factory=list)
    _input_end: float | None = None
    _reply_done: asyncio.Event = field(default_factory=asyncio.Event)

    async def run(self, plan: list[tuple[float, str, np.ndarray]], timeout: float = 60.0) -> None:
        """`plan`: (when, question, 16 kHz audio) in order; `when` is the clock time the first
        question starts, for the later ones the pause in seconds after the previous reply ended."""
        ws = await open_device("ws", self.url, self.box_id)
        async with ws:
            await ws.send(encode(Hello(device_id=self.box_id, audio_in=AudioFormat(sample_rate=RATE),
                                       audio_out=AudioFormat(sample_rate=RATE))))
            if not isinstance(decode(await asyncio.wait_for(ws.recv(), 15)), Welcome):
                raise RuntimeError(f"{self.box_id}: no welcome")
            receiver = asyncio.create_task(self._receive(ws))
            try:
                await self._talk(ws, plan, timeout)
            finally:
                receiver.cancel()
                await asyncio.gather(receiver, return_exceptions=True)

    async def _talk(self, ws: Any, plan: list[tuple[float, str, np.ndarray]], timeout: float) -> None:
        step = RATE * CHUNK_MS // 1000
        silence = float_to_s16le(np.zeros(step, np.float32))
        await ws.send(encode(AudioStart(stream_id=1, format=AudioFormat(sample_rate=RATE))))
        seq, clock = 0, time.monotonic()

        async def chunk(data: bytes) -> None:
            nonlocal seq, clock
            await ws.send(encode(AudioChunk(stream_id=1, seq=seq, data=data)))
            seq += 1
            clock += CHUNK_MS / 1000
            if (delay := clock - time.monotonic()) > 0:
                await asyncio.sleep(delay)

        for k, (when, question, audio) in enumerate(plan):
            start = when if k == 0 else time.monotonic() + when
            while clock < start:  # the microphone streams silence until the question starts
                await chunk(silence)
            self.turns.append(turn := Turn(question))
            self._reply_done.clear()
            for i in range(0, len(audio), step):
                await chunk(float_to_s16le(audio[i: i + step]))
            self._input_end = time.monotonic()
            deadline = self._input_end + timeout
            while not self._reply_done.is_set():
                if time.monotonic() > deadline:
                    turn.error = turn.error or "no reply"
                    break
                await chunk(silence)
            self._input_end = None

    async def _receive(self, ws: Any) -> None:
        async for frame in ws:
            msg = decode(frame)
            turn = self.turns[-1] if self.turns else None
            if turn is None:
                continue
            if isinstance(msg, AudioChunk) and turn.latency_ms is None and self._input_end is not None:
                turn.latency_ms = (time.monotonic() - self._input_end) * 1000
            elif isinstance(msg, Transcript):
                turn.transcript = msg.text
                if not msg.text:
                    self._reply_done.set()
            elif isinstance(msg, ReplyText) and msg.final:
                self._reply_done.set()
            elif isinstance(msg, Error):
                turn.error = msg.code
                self._reply_done.set()


def word_errors(reference: str, hypothesis: str) -> tuple[int, int]:
    """(word errors, reference words) of a box's transcript against its question: the edit distance
    of the words as the brain normalizes them."""
    ref, hyp = normalize(reference).split(), normalize(hypothesis).split()
    return edit_distance(ref, hyp), len(ref)
