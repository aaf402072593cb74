"""One device's spoken conversation: listen -> transcribe -> decide -> speak, with barge-in.

Timeline of a turn (the latency trick): when trailing silence starts (SPECULATE), the utterance is
decoded right away on the ASR thread while the endpointer keeps counting silence. If the user
resumes, that result is dropped; if the endpoint is confirmed, the transcript is usually ready
already, so the reply starts within a TTS call of the endpoint decision. When the brain session
`speculates` (the LLM brain) and `brain.speculate` is on, it is asked on that speculative
transcript too, so an LLM's first sentence is often there by the endpoint
(gateway/voice/speculation.py); a resumed utterance withdraws that reply (`session.withdraw()`)
and cancels its request.

The conversation talks to its connection's `BrainSession` (handed in by the device session) through
the brain contract only: `reply` for each turn, then `spoken` with what was actually played (the
speech of the sentences whose audio started), after the reply ended or was interrupted.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np

from firmware_protocol import AudioFormat, AudioStop, Error, Message, ReplyText, StopReason, Transcript, VadEvent
from gateway.audio.pcm import s16le_to_float
from gateway.config import GatewayConfig
from gateway.engines.runner import EngineRunner
from gateway.errors import GatewayError
from gateway.brain.contract import BrainContext, BrainSession, Sentence, sentences_of
from gateway.voice.endpointing import Endpointer, Event
from gateway.voice.listener import Listener
from gateway.voice.speculation import SpeculativeReply
from gateway.voice.speaker import Playback, SentenceHook, Speaker

log = logging.getLogger(__name__)

Send = Callable[[Message], Awaitable[None]]


@dataclass
class TurnMetrics:
    """Latency breakdown of one turn, in milliseconds (see `gateway bench`)."""

    device_id: str
    utterance_ms: float = 0.0
    endpoint_wait_ms: float = 0.0  # trailing silence the endpointer waited for (audio time)
    asr_ms: float = 0.0  # decode compute time
    asr_after_endpoint_ms: float = 0.0  # how long the turn waited for ASR after the endpoint
    speculative: bool = False  # transcript came from the speculative decode
    speculative_reply: bool = False  # the brain was asked before the endpoint (gateway/voice/speculation.py)
    first_sentence_after_endpoint_ms: float = 0.0  # when the brain's first sentence was there (0: before)
    brain_ms: float = 0.0
    first_tts_ms: float = 0.0
    endpoint_to_first_audio_ms: float = 0.0
    transcript: str = ""
    reply: str = ""
    barged_in: bool = False


@dataclass
class _Decode:
    task: asyncio.Task[tuple[str, float]]
    started: float = field(default_factory=time.monotonic)
    reply: SpeculativeReply | None = None  # the brain asked on the speculative transcript


class Conversation:
    def __init__(
        self,
        device_id: str,
        peer: str,
        cfg: GatewayConfig,
        runner: EngineRunner,
        brain: BrainSession,
        send: Send,
        audio_in: AudioFormat,
        audio_out: AudioFormat,
        on_metrics: Callable[[TurnMetrics], None] | None = None,
        on_sentence: SentenceHook | None = None,
    ) -> None:
        self.device_id = device_id
        self._peer = peer
        self._cfg = cfg
        self._runner = runner
        self._brain = brain
        self._send = send
        self._in = audio_in
        self._on_metrics = on_metrics
        v = cfg.vad
        self._listener = Listener(
            runner,
            runner.vad.clone(),
            Endpointer(v.min_speech_ms, v.trailing_silence_ms, v.speculative_after_ms, v.max_utterance_s * 1000),
            audio_in.sample_rate,
            v.preroll_ms,
        )
        self._speaker = Speaker(runner, send, audio_out, cfg.audio.chunk_ms, cfg.audio.prebuffer_ms,
                                on_sentence=on_sentence)
        self._spec: _Decode | None = None
        self._speculate_reply = cfg.brain.speculate and brain.speculates
        self._turn: asyncio.Task[None] | None = None
        self._play: Playback | None = None

    # ---- inbound -------------------------------------------------------------------------
    async def on_audio(self, data: bytes) -> None:
        samples = s16le_to_float(data, self._in.channels)
        for heard in await self._listener.feed(samples):
            await self._on_event(heard.event, heard.audio_ms)

    async def on_audio_stop(self) -> None:
        """The device ended its audio stream (push-to-talk released): the utterance ends now."""
        audio = self._listener.utterance_audio()
        if self._listener.force_endpoint() and audio.size:
            await self._send(VadEvent(event=VadEvent.SPEECH_END, audio_ms=int(self._listener.position_ms)))
            await self._drop_speculation()
            self._listener.end_utterance()
            self._start_turn(self._decode(audio), TurnMetrics(self.device_id, utterance_ms=1000 * audio.size / 16000))

    async def on_text(self, text: str) -> None:
        await self.interrupt("new text input")

        async def given() -> tuple[str, float]:
            return text, 0.0

        self._start_turn(asyncio.create_task(given()), TurnMetrics(self.device_id))

    async def say(self, text: str) -> None:
        """Speak `text` now (an announcement, an alert), interrupting any reply in progress."""
        await self.interrupt("announcement")

        async def sentences() -> AsyncIterator[Sentence]:
            for sentence in sentences_of(text):
                yield sentence

        async def run(play: Playback) -> None:
            await self._speaker.speak(sentences(), play)
            await self._send(ReplyText(text=play.shown(), final=True))

        self._play = Playback()
        self._turn = asyncio.create_task(run(self._play))

    async def interrupt(self, reason: str) -> None:
        """Barge-in: stop the reply within one chunk and tell the device."""
        turn, play = self._turn, self._play
        if turn is None or turn.done():
            return
        turn.cancel()
        try:
            await turn
        except asyncio.CancelledError:
            pass
        log.info("%s (%s): reply interrupted: %s", self._peer, self.device_id, reason)
        if play is not None:
            if play.open_stream is not None:
                await self._send(AudioStop(stream_id=play.open_stream, reason=StopReason.ABORTED))
            await self._send(ReplyText(text=play.shown(), final=True))

    async def close(self) -> None:
        if self._turn is not None:
            self._turn.cancel()
        if self._spec is not None:
            self._spec.task.cancel()
            await self._drop_speculation()

    # ---- listening ----------------------------------------------------------------------
    async def _on_event(self, event: Event, audio_ms: float) -> None:
        if event is Event.SPEECH_START:
            await self._send(VadEvent(event=VadEvent.SPEECH_START, audio_ms=int(audio_ms)))
            if self._cfg.vad.barge_in:
                await self.interrupt("the user started speaking")
        elif event is Event.SPECULATE:
            decode = self._decode(self._listener.utterance_audio())
            reply = None
            if self._speculate_reply:
                ctx = BrainContext(self.device_id, datetime.now().astimezone(), reports_playback=True)
                reply = SpeculativeReply(self._brain, ctx, decode)
            self._spec = _Decode(decode, reply=reply)
        elif event is Event.RESUMED:
            await self._drop_speculation()  # stale: the decode finishes on its thread and is ignored
        elif event is Event.ENDPOINT:
            await self._send(VadEvent(event=VadEvent.SPEECH_END, audio_ms=int(audio_ms)))
            audio = self._listener.utterance_audio()
            self._listener.end_utterance()
            metrics = TurnMetrics(
                self.device_id,
                utterance_ms=1000 * audio.size / 16000,
                endpoint_wait_ms=float(self._cfg.vad.trailing_silence_ms),
            )
            reply = None
            if self._spec is not None:
                decode, metrics.speculative, reply = self._spec.task, True, self._spec.reply
            else:
                decode = self._decode(audio)
            self._spec = None
            self._start_turn(decode, metrics, reply)

    async def _drop_speculation(self) -> None:
        spec, self._spec = self._spec, None
        if spec is not None and spec.reply is not None:
            await spec.reply.withdraw()

    def _decode(self, audio: np.ndarray) -> asyncio.Task[tuple[str, float]]:
        async def run() -> tuple[str, float]:
            started = time.monotonic()
            text = await self._runner.transcribe(audio)
            return text, (time.monotonic() - started) * 1000

        return asyncio.create_task(run())

    # ---- replying -----------------------------------------------------------------------
    def _start_turn(self, decode: asyncio.Task[tuple[str, float]], metrics: TurnMetrics,
                    reply: SpeculativeReply | None = None) -> None:
        self._play = Playback()
        self._turn = asyncio.create_task(self._run_turn(decode, metrics, self._play, reply))

    async def _run_turn(self, decode: asyncio.Task[tuple[str, float]], m: TurnMetrics, play: Playback,
                        reply: SpeculativeReply | None = None) -> None:
        endpoint_at = time.monotonic()
        try:
            text, m.asr_ms = await decode
            m.asr_after_endpoint_ms = (time.monotonic() - endpoint_at) * 1000
            m.transcript = text
            await self._send(Transcript(text=text, final=True))
            if not text:
                log.info("%s (%s): heard speech but no words", self._peer, self.device_id)
                return
            brain_started = time.monotonic()
            if reply is not None:  # asked before the endpoint: its first sentence may be there already
                m.speculative_reply = True
                sentences = reply.sentences()
            else:
                sentences = self._brain.reply(text, BrainContext(self.device_id, datetime.now().astimezone(),
                                                                 reports_playback=True))
            first: list[float] = []
            await self._speaker.speak(self._mark_first(sentences, first), play)
            if first and reply is not None and reply.started is not None and reply.first_at is not None:
                brain_started, first[:1] = reply.started, [reply.first_at]
            if first:
                m.brain_ms = (first[0] - brain_started) * 1000
                m.first_sentence_after_endpoint_ms = max(0.0, (first[0] - endpoint_at) * 1000)
            m.reply = play.said()
            self._brain.spoken(m.reply)  # played to the end: the brain may remember it now
            await self._send(ReplyText(text=play.shown(), final=True))  # display text; m.reply is speech
        except asyncio.CancelledError:
            m.barged_in = True
            m.reply = play.said()
            self._brain.spoken(m.reply)  # the brain's history keeps only what was played
            raise
        except GatewayError as exc:
            log.exception("%s (%s): %s", self._peer, self.device_id, exc.code)
            await self._send(Error(code=exc.code, text=exc.text))
        except Exception as exc:  # stage boundary: report, keep the session alive
            log.exception("%s (%s): turn failed", self._peer, self.device_id)
            await self._send(Error(code="internal-error", text=f"the reply failed: {exc}"))
        finally:
            if reply is not None:
                await reply.close()  # after a barge-in: the brain's request must not run on
            if play.first_audio_at is not None:
                m.endpoint_to_first_audio_ms = (play.first_audio_at - endpoint_at) * 1000
            m.first_tts_ms = play.first_tts_ms or 0.0
            if m.transcript:
                self._report(m)

    @staticmethod
    async def _mark_first(sentences: AsyncIterator[Sentence], first: list[float]) -> AsyncIterator[Sentence]:
        async for s in sentences:
            if not first:
                first.append(time.monotonic())
            yield s

    def _report(self, m: TurnMetrics) -> None:
        log.info(
            "%s (%s): heard %r -> %r | asr %.0f ms (%s), endpoint->first audio %.0f ms%s",
            self._peer,
            self.device_id,
            m.transcript,
            m.reply,
            m.asr_ms,
            "speculative" if m.speculative else "after endpoint",
            m.endpoint_to_first_audio_ms,
            " [barge-in]" if m.barged_in else "",
        )
        if self._on_metrics is not None:
            self._on_metrics(m)
