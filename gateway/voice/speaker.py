"""Speaker: turns reply sentences into paced audio messages for one device.

Each sentence is synthesized (TTS workers) as soon as its text is known, resampled to the
device's rate and sent as its own audio stream: `ReplyText`, `AudioStart`, `AudioChunk`s,
`AudioStop`. Synthesis runs ahead of playback; sending is paced (see `gateway.audio.pacing`).
TTS gets a sentence's `speech`; its ReplyText carries its `display` text. A reply's long first
sentence is synthesized clause by clause (gateway/voice/pieces.py `synthesis_pieces`): its stream
starts with the first clause's audio and the others follow in the same stream, joined without a
gap. Its later sentences are synthesized in pieces too (`later_pieces`: at most MAX_WORDS words a
call, cut at the clauses, else between phrases), joined the same way into the sentence's one
stream: a TTS worker's call cannot be taken back, so no call may hold a worker for a whole long
sentence (a 36-word one 1.4 s at load ~4, its 12-word pieces 0.7 s) while another box's first
piece waits for it. Each piece asks the TTS by its own deadline: the reply's first audio now,
later audio when what is queued ahead of it will have played, so other boxes' first pieces go
first, within one short call. The extra calls cost CPU (piper ends each piece as a sentence,
its last word drawn out and ~0.3 s of silence synthesized and trimmed): +16% of piper's CPU on
four sentences of 22 s of speech whose 36- and 32-word ones became 3 and 4 calls; a sentence of
at most MAX_WORDS words is one call as before.
`prepare` starts the synthesis of a reply's first piece before the reply is spoken (the brain's
first sentence on the speculative transcript, during the endpoint's trailing silence): the reply
that then begins with that piece takes its audio instead of synthesizing it again, so its first
audio waits only for what the synthesis has left. Nothing of it is sent before `speak`.
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
from gateway.engines.base import SpeechPiece, SynthChunk
from gateway.engines.runner import EngineRunner
from gateway.brain.contract import Sentence
from gateway.voice.pieces import CLAUSE_PAUSE_MS, WORD_PAUSE_MS, ends_clause, join_edges, later_pieces, synthesis_pieces

_AHEAD_MARGIN_S = 0.5  # a later piece is due this long before the audio ahead of it runs out


@dataclass(frozen=True)
class _Audio:
    """One piece of a sentence's stream, synthesized and resampled, for the sending loop."""

    sentence: Sentence
    stream_id: int
    pcm: bytes
    extra: list[Message]
    first: bool
    last: bool

Send = Callable[[Message], Awaitable[None]]


SentenceHook = Callable[[Sentence, list[SynthChunk], int, SpeechPiece], list[Message]]
"""(sentence, this piece's synthesized chunks, its stream id, the piece) -> extra messages for the
device: for the first piece sent after the sentence's ReplyText and before its AudioStart
(expression packets: action, sentiment, visemes...), for a later piece before that piece's first
audio (its visemes, appended to the stream's track). A sentence of one piece gets one call,
`SpeechPiece.whole`. Called while synthesizing, ahead of playback, with the `Sentence` as the brain
yielded it (speech, display text and hints)."""
SentenceStart = Callable[[Sentence, int], Awaitable[None]]
"""(sentence, its stream id): awaited when the sentence begins to play, before its ReplyText."""


@dataclass
class Playback:
    """What happened to one reply (shared with the caller, filled in while it plays)."""

    sentences_started: list[Sentence] = field(default_factory=list)
    audio_seconds: float = 0.0
    first_audio_at: float | None = None  # clock time the first audio chunk was handed to the link
    first_tts_ms: float | None = None  # how long the first audio waited for its synthesis
    first_prepared: bool = False  # its synthesis was started before the reply (`Speaker.prepare`)
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
        who: str = "",
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
        self._who = who  # names the device in the engines' wait log lines
        self._prepared: tuple[str, asyncio.Task[list[SynthChunk]]] | None = None  # (piece text, its synthesis)

    def _stream_id(self) -> int:
        sid = self._next_stream
        self._next_stream = sid % 0xFFFF + 1
        return sid

    def prepare(self, sentence: Sentence) -> None:
        """Start synthesizing the first piece of a reply that will begin with `sentence` (replacing
        an earlier preparation). `speak` takes it when its reply does; `drop_prepared` cancels it."""
        self.drop_prepared()
        if not sentence.speech.strip():
            return
        text = synthesis_pieces(sentence.speech)[0]
        task = asyncio.create_task(self._runner.synthesize(text, who=self._who), name=f"prepare {self._who}")
        task.add_done_callback(_retrieve)
        self._prepared = (text, task)

    def drop_prepared(self) -> None:
        """Cancel a preparation no reply took (the speculative reply was withdrawn)."""
        if self._prepared is not None:
            self._prepared[1].cancel()
            self._prepared = None

    async def _first_piece(self, text: str, play: Playback) -> list[SynthChunk]:
        """A reply's first piece: the prepared synthesis when it is of `text`, else a new one now."""
        prepared, self._prepared = self._prepared, None
        if prepared is not None:
            if prepared[0] == text:
                play.first_prepared = True
                return await prepared[1]
            prepared[1].cancel()  # stale: another reply began
        return await self._runner.synthesize(text, who=self._who)

    async def _synthesize(self, sentences: AsyncIterator[Sentence], out: asyncio.Queue, play: Playback) -> None:
        bytes_per_s = self._fmt.sample_rate * 2
        queued_s = 0.0  # audio of this reply synthesized so far
        first_sentence = True
        try:
            async for sentence in sentences:
                if not sentence.speech.strip():
                    continue
                sid = self._stream_id()
                texts = synthesis_pieces(sentence.speech) if first_sentence else later_pieces(sentence.speech)
                first_sentence = False
                so_far: list[SynthChunk] = []
                offset_ms = 0.0
                for i, text in enumerate(texts):
                    started = self._clock()
                    if queued_s == 0.0 and i == 0:
                        chunks = await self._first_piece(text, play)
                    else:
                        chunks = await self._runner.synthesize(text, who=self._who,
                                                               deadline=self._due(play, queued_s))
                    if play.first_tts_ms is None:
                        play.first_tts_ms = (self._clock() - started) * 1000
                    if len(texts) > 1:
                        chunks = self._joined(chunks, texts, i)
                    so_far += chunks
                    pcm = b"".join(
                        float_to_s16le(resample(int16_to_float(c.pcm), c.sample_rate, self._fmt.sample_rate))
                        for c in chunks
                    )
                    last = i == len(texts) - 1
                    piece = SpeechPiece(i, offset_ms, last, tuple(so_far))
                    extra = self._on_sentence(sentence, chunks, sid, piece) if self._on_sentence else []
                    await out.put(_Audio(sentence, sid, pcm, extra, i == 0, last))
                    offset_ms += sum(len(c.pcm) * 1000 / c.sample_rate for c in chunks)
                    queued_s += len(pcm) / bytes_per_s
        finally:
            await out.put(None)

    def _due(self, play: Playback, queued_s: float) -> float | None:
        """When the next piece's audio is needed: now (None) for the reply's first, else when the
        audio queued ahead of it will have played (less a margin)."""
        if queued_s == 0.0:
            return None
        now = self._clock()
        played = now - play.first_audio_at if play.first_audio_at is not None else 0.0
        return now + max(0.0, queued_s - played - _AHEAD_MARGIN_S)

    @staticmethod
    def _joined(chunks: list[SynthChunk], texts: list[str], i: int) -> list[SynthChunk]:
        """Trim the silence at the cuts before and after piece `i` to a natural pause."""
        def pause(k: int) -> float:  # the cut after texts[k]
            return CLAUSE_PAUSE_MS if ends_clause(texts[k]) else WORD_PAUSE_MS

        lead = pause(i - 1) / 3 if i > 0 else None
        tail = pause(i) * 2 / 3 if i < len(texts) - 1 else None
        return join_edges(chunks, keep_lead_ms=lead, keep_tail_ms=tail)

    async def speak(self, sentences: AsyncIterator[Sentence], play: Playback) -> None:
        """Synthesize and send every sentence. Cancel the calling task to stop."""
        queue: asyncio.Queue[_Audio | None] = asyncio.Queue(maxsize=8)
        producer = asyncio.create_task(self._synthesize(sentences, queue, play))
        pacer = Pacer(self._prebuffer_ms)
        size = chunk_bytes(self._fmt.sample_rate, self._chunk_ms)
        bytes_per_ms = self._fmt.sample_rate * 2 / 1000
        try:
            seq, rest = 0, b""  # a stream's chunks run on across its pieces
            while (item := await queue.get()) is not None:
                sid = item.stream_id
                if item.first:
                    play.sentences_started.append(item.sentence)
                    if self._on_start is not None:
                        await self._on_start(item.sentence, sid)
                    await self._send(ReplyText(text=item.sentence.display, stream_id=sid, final=False))
                for message in item.extra:
                    await self._send(message)
                if item.first:
                    await self._send(AudioStart(stream_id=sid, format=self._fmt))
                    play.open_stream = sid
                    seq, rest = 0, b""
                data = rest + item.pcm
                whole = len(data) if item.last else len(data) - len(data) % size
                data, rest = data[:whole], data[whole:]
                for piece in split_bytes(data, size):
                    ms = len(piece) / bytes_per_ms
                    delay = pacer.delay_before(ms, self._clock())
                    if delay > 0:
                        await asyncio.sleep(delay)
                    await self._send(AudioChunk(stream_id=sid, seq=seq, data=piece))
                    seq += 1
                    if play.first_audio_at is None:
                        play.first_audio_at = self._clock()
                    pacer.sent(ms)
                    play.audio_seconds += ms / 1000
                if item.last:
                    await self._send(AudioStop(stream_id=sid, reason=StopReason.END))
                    play.open_stream = None
            await producer  # surface synthesis errors
        finally:  # owned: ended with the reply (cancelled by a barge-in or a failed send)
            producer.cancel()
            await asyncio.gather(producer, return_exceptions=True)


def _retrieve(task: asyncio.Task[list[SynthChunk]]) -> None:
    """A preparation nobody awaits (dropped) must not log 'exception was never retrieved'."""
    if not task.cancelled():
        task.exception()
