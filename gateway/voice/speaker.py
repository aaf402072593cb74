"""Speaker: turns reply sentences into paced audio messages for one device.

Each sentence is synthesized (TTS thread) as soon as its text is known, resampled to the
device's rate and sent as its own audio stream: `ReplyText`, `AudioStart`, `AudioChunk`s,
`AudioStop`. Synthesis runs ahead of playback; sending is paced (see `gateway.audio.pacing`).
TTS gets a sentence's `speech`; its ReplyText carries its `display` text.
Cancelling the task that runs `speak` stops the reply within one chunk (the synthesis task is
cancelled and awaited with it); `Playback.open_stream` then names the stream that was cut, for
the caller's `BargedIn` event (the wire sends its `AudioStop(ABORTED)`, gateway/voice/wire.py).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

from firmware_protocol import AudioChunk, AudioFormat, AudioStart, AudioStop, Message, ReplyText, StopReason
from gateway.audio.pacing import Pacer
from gateway.audio.pcm import chunk_bytes, float_to_s16le, int16_to_float, resample, split_bytes
from gateway.engines.base import SynthChunk
from gateway.engines.runner import EngineRunner
from gateway.brain.contract import Sentence

Send = Callable[[Message], Awaitable[None]]
SentenceHook = Callable[[Sentence, list[SynthChunk], int], list[Message]]
"""(sentence, its synthesized chunks, its stream id) -> extra messages for the device, sent after
the sentence's ReplyText and before its AudioStart (expression packets: visemes, action...).
Called while synthesizing, ahead of playback, with the `Sentence` as the brain yielded it (speech,
display text and hints)."""
SentenceStart = Callable[[Sentence, int], Awaitable[None]]
"""(sentence, its stream id): awaited when the sentence begins to play, before its ReplyText."""


@dataclass
class Playback:
    """What happened to one reply (shared with the caller, filled in while it plays)."""

    sentences_started: list[Sentence] = field(default_factory=list)
    audio_seconds: float = 0.0
    first_audio_at: float | None = None  # clock time the first audio chunk was handed to the link
    first_tts_ms: float | None = None  # synthesis time of the first sentence
    open_stream: int | None = None  # stream id currently playing (for abort)

    def shown(self) -> str:
        """The display text of the sentences whose audio started (the closing ReplyText)."""
        return " ".join(s.display for s in self.sentences_started)

    def said(self) -> str:
        """The speech text of the sentences whose audio started (what the brain may remember)."""
        return " ".join(s.speech for s in self.sentences_started)


class Speaker:
    def __init__(
        self,
        runner: EngineRunner,
        send: Send,
        out_format: AudioFormat,
        chunk_ms: int,
        prebuffer_ms: int,
        clock: Callable[[], float] = time.monotonic,
        on_sentence: SentenceHook | None = None,
        on_start: SentenceStart | None = None,
    ) -> None:
        self._runner = runner
        self._send = send
        self._fmt = out_format
        self._chunk_ms = chunk_ms
        self._prebuffer_ms = prebuffer_ms
        self._clock = clock
        self._next_stream = 1
        self._on_sentence = on_sentence
        self._on_start = on_start

    def _stream_id(self) -> int:
        sid = self._next_stream
        self._next_stream = sid % 0xFFFF + 1
        return sid

    async def _synthesize(self, sentences: AsyncIterator[Sentence], out: asyncio.Queue, play: Playback) -> None:
        try:
            async for sentence in sentences:
                if not sentence.speech.strip():
                    continue
                started = self._clock()
                chunks = await self._runner.synthesize(sentence.speech)
                if play.first_tts_ms is None:
                    play.first_tts_ms = (self._clock() - started) * 1000
                pcm = b"".join(
                    float_to_s16le(resample(int16_to_float(c.pcm), c.sample_rate, self._fmt.sample_rate))
                    for c in chunks
                )
                sid = self._stream_id()
                extra = self._on_sentence(sentence, chunks, sid) if self._on_sentence else []
                await out.put((sentence, pcm, sid, extra))
        finally:
            await out.put(None)

    async def speak(self, sentences: AsyncIterator[Sentence], play: Playback) -> None:
        """Synthesize and send every sentence. Cancel the calling task to stop."""
        queue: asyncio.Queue[tuple[Sentence, bytes, int, list[Message]] | None] = asyncio.Queue(maxsize=8)
        producer = asyncio.create_task(self._synthesize(sentences, queue, play))
        pacer = Pacer(self._prebuffer_ms)
        size = chunk_bytes(self._fmt.sample_rate, self._chunk_ms)
        bytes_per_ms = self._fmt.sample_rate * 2 / 1000
        try:
            while (item := await queue.get()) is not None:
                sentence, pcm, sid, extra = item
                play.sentences_started.append(sentence)
                if self._on_start is not None:
                    await self._on_start(sentence, sid)
                await self._send(ReplyText(text=sentence.display, stream_id=sid, final=False))
                for message in extra:
                    await self._send(message)
                await self._send(AudioStart(stream_id=sid, format=self._fmt))
                play.open_stream = sid
                for seq, piece in enumerate(split_bytes(pcm, size)):
                    ms = len(piece) / bytes_per_ms
                    delay = pacer.delay_before(ms, self._clock())
                    if delay > 0:
                        await asyncio.sleep(delay)
                    await self._send(AudioChunk(stream_id=sid, seq=seq, data=piece))
                    if play.first_audio_at is None:
                        play.first_audio_at = self._clock()
                    pacer.sent(ms)
                    play.audio_seconds += ms / 1000
                await self._send(AudioStop(stream_id=sid, reason=StopReason.END))
                play.open_stream = None
            await producer  # surface synthesis errors
        finally:  # owned: ended with the reply (cancelled by a barge-in or a failed send)
            producer.cancel()
            await asyncio.gather(producer, return_exceptions=True)
