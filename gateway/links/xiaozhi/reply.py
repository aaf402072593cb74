"""What a xiaozhi box hears of a reply: `tts` states, one emotion per sentence, paced Opus audio.

The box's connection (connection.py) hands each outbound reply message here: a sentence's
`ReplyText(final=False)` -> `tts start` (a reply's first) and `tts sentence_start`; `AudioStart`
-> `tts start` and the sentence's `llm {emotion}` (from its Action/Sentiment, emotions.py; sent
when it changes); PCM -> Opus at the box's frame duration, paced (playback.py) so the box's queue
never overflows; the closing `ReplyText(final=True)` -> the encoder's tail, then `tts stop` once
the box has played it all; a barge-in's `AudioStop(ABORTED)` drops what is encoded and queued.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from gateway.audio.opus import OpusEncoder
from gateway.links.xiaozhi import framing
from gateway.links.xiaozhi.channel import BoxChannel
from gateway.links.xiaozhi.emotions import EMOJI, EmotionTable
from gateway.links.xiaozhi.playback import BoxPlayback


class BoxReply:
    def __init__(self, channel: BoxChannel, frame_ms: int, max_ahead_ms: int, emotions: EmotionTable,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        self._channel = channel
        self._frame_ms = frame_ms
        self._emotions = emotions
        self._clock = clock
        self._sleep = sleep
        self._box = BoxPlayback(max_ahead_ms)
        self.encoder: OpusEncoder | None = None  # from the box's hello on
        self._speaking = False
        self._action: str | None = None
        self._sentiment: float | None = None
        self._emotion: str | None = None
        self._sent_ms = 0

    def action(self, code: str) -> None:
        self._action = code

    def sentiment(self, tenths: int) -> None:
        self._sentiment = tenths / 10

    async def sentence(self, session: str, text: str) -> None:
        await self._start_speaking(session)
        await self._channel.send_json(framing.tts(session, "sentence_start", text))

    async def end(self, session: str) -> None:
        """The reply's closing text: the encoder's tail, then, once the box has played what it was
        sent, `tts stop` (nothing if it never spoke). Not sooner: in auto mode firmware 1.9 and 2.0
        turn to listening on `tts stop` and drop what is still queued (ResetDecoder), which cut
        the last words of every reply; over MQTT + UDP the stop could also overtake the audio."""
        if self._speaking:
            await self._packets(self.encoder.flush() if self.encoder else [])
            self._speaking = False
            played_s = self._box.queued_ms(self._clock()) / 1000  # (+ a frame: the box's decoding
            if played_s > 0:                                         # and output buffer)
                await self._sleep(played_s + self._frame_ms / 1000)
                if self._speaking:  # the next reply started meanwhile: it goes on, its end says stop
                    return
            await self._channel.send_json(framing.tts(session, "stop"))

    async def audio_start(self, session: str) -> None:
        await self._start_speaking(session)
        emotion = self._emotions.pick(self._action, self._sentiment)
        self._action = self._sentiment = None
        if emotion is not None and emotion != self._emotion:
            self._emotion = emotion
            await self._channel.send_json(framing.llm(session, emotion, EMOJI[emotion]))

    async def audio_stop(self, aborted: bool) -> None:
        """A sentence's audio ended; `aborted` (barge-in): what is encoded or queued is dropped."""
        if aborted:
            if self.encoder is not None:
                self.encoder.drop()
            self._box.clear()
        elif self.encoder is not None:
            await self._packets(self.encoder.flush())

    async def audio(self, pcm: bytes) -> None:
        if self.encoder is not None:
            await self._packets(self.encoder.encode(pcm))

    async def _start_speaking(self, session: str) -> None:
        if not self._speaking:
            self._speaking = True
            self._emotion = None
            await self._channel.send_json(framing.tts(session, "start"))

    async def _packets(self, packets: list[bytes]) -> None:
        frame_ms = self._frame_ms
        for packet in packets:
            wait = self._box.wait_before(frame_ms, self._clock())
            if wait > 0:
                await self._sleep(wait)
            await self._channel.send_audio(packet, self._sent_ms)
            self._box.sent(frame_ms, self._clock())
            self._sent_ms += frame_ms
