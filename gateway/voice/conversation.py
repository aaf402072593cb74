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
speech of the sentences whose audio started), after the reply ended or was interrupted (the turns
run in gateway/voice/replier.py). Everything a turn does is published once, as the typed events of
gateway/voice/events.py, to the session's `TurnEvents`: the device's VadEvent, Transcript, closing
ReplyText and AudioStop(ABORTED) come from them (gateway/voice/wire.py); a reply's audio streams
are the Speaker's.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np

from firmware_protocol import AudioFormat
from gateway.audio.pcm import s16le_to_float
from gateway.brain.contract import BrainContext, BrainSession, Sentence
from gateway.config import GatewayConfig
from gateway.engines.base import VadEngine
from gateway.engines.runner import EngineRunner
from gateway.voice.endpointing import Endpointer, Event
from gateway.voice.events import SentenceStarted, SpeechEnded, SpeechStarted, TurnEvents, TurnMetrics
from gateway.voice.listener import ASR_RATE, Listener
from gateway.voice.replier import Decode, Replier
from gateway.voice.speaker import Send, SentenceHook, Speaker
from gateway.voice.speculation import SpeculativeReply

log = logging.getLogger(__name__)

__all__ = ["Conversation", "TurnMetrics"]


@dataclass
class _Speculation:
    decode: asyncio.Task[tuple[str, float]]
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
        events: TurnEvents,
        on_sentence: SentenceHook | None = None,
        vad: VadEngine | None = None,  # this session's detector (runner.clone_vad(), made off the loop)
    ) -> None:
        """`send` carries the reply's audio streams; everything else the device is told comes from
        the turn `events` (whose sinks include the wire, gateway/voice/wire.py)."""
        self.device_id = device_id
        self._cfg = cfg
        self._runner = runner
        self._brain = brain
        self._events = events
        self._in = audio_in
        v = cfg.vad
        self._listener = Listener(
            runner,
            vad if vad is not None else runner.vad.clone(),
            Endpointer(v.min_speech_ms, v.trailing_silence_ms, v.speculative_after_ms, v.max_utterance_s * 1000),
            audio_in.sample_rate,
            v.preroll_ms,
        )

        async def started(sentence: Sentence, stream_id: int) -> None:
            await events.publish(SentenceStarted(device_id, stream_id, sentence))

        speaker = Speaker(runner, send, audio_out, cfg.audio.chunk_ms, cfg.audio.prebuffer_ms,
                          on_sentence=on_sentence, on_start=started, who=device_id)
        self._replier = Replier(device_id, peer, brain, speaker, events)
        self._spec: _Speculation | None = None
        self._speculate_reply = cfg.brain.speculate and brain.speculates

    # ---- inbound -------------------------------------------------------------------------
    async def on_audio(self, data: bytes) -> None:
        samples = s16le_to_float(data, self._in.channels)
        for heard in await self._listener.feed(samples):
            await self._on_event(heard.event, heard.audio_ms)

    async def on_audio_stop(self) -> None:
        """The device ended its audio stream (push-to-talk released): the utterance ends now."""
        audio = self._listener.utterance_audio()
        if self._listener.force_endpoint() and audio.size:
            await self._events.publish(SpeechEnded(self.device_id, int(self._listener.position_ms)))
            await self._drop_speculation()
            self._listener.end_utterance()
            self._replier.answer(self._decode(audio), TurnMetrics(self.device_id, utterance_ms=_ms(audio)))

    async def on_text(self, text: str) -> None:
        await self.interrupt("new text input")
        given: Decode = asyncio.get_running_loop().create_future()
        given.set_result((text, 0.0))
        self._replier.answer(given, TurnMetrics(self.device_id))

    async def say(self, text: str) -> None:
        """Speak `text` now (an announcement, an alert), interrupting any reply in progress."""
        await self._replier.announce(text)

    async def interrupt(self, reason: str) -> None:
        """Barge-in: stop the reply within one chunk and tell the device."""
        await self._replier.interrupt(reason)

    async def close(self) -> None:
        """End the running reply and the speculative decode (cancelled and awaited)."""
        await self._replier.close()
        await self._drop_speculation()

    # ---- listening ----------------------------------------------------------------------
    async def _on_event(self, event: Event, audio_ms: float) -> None:
        if event is Event.SPEECH_START:
            await self._events.publish(SpeechStarted(self.device_id, int(audio_ms)))
            if self._cfg.vad.barge_in:
                await self.interrupt("the user started speaking")
        elif event is Event.SPECULATE:
            decode = self._decode(self._listener.utterance_audio())
            reply = None
            if self._speculate_reply:
                ctx = BrainContext(self.device_id, datetime.now().astimezone(), reports_playback=True)
                reply = SpeculativeReply(self._brain, ctx, decode)
            self._spec = _Speculation(decode, reply=reply)
        elif event is Event.RESUMED:
            await self._drop_speculation()  # stale: its decode is cancelled (the thread's result is ignored)
        elif event is Event.ENDPOINT:
            await self._events.publish(SpeechEnded(self.device_id, int(audio_ms)))
            audio = self._listener.utterance_audio()
            self._listener.end_utterance()
            metrics = TurnMetrics(self.device_id, utterance_ms=_ms(audio),
                                  endpoint_wait_ms=float(self._cfg.vad.trailing_silence_ms))
            spec, self._spec = self._spec, None
            if spec is not None:  # the turn owns the speculative decode (and reply) from here on
                metrics.speculative = True
                self._replier.answer(spec.decode, metrics, spec.reply)
            else:
                self._replier.answer(self._decode(audio), metrics)

    async def _drop_speculation(self) -> None:
        """Forget the speculative decode: its early reply withdrawn, the decode cancelled and awaited."""
        spec, self._spec = self._spec, None
        if spec is None:
            return
        if spec.reply is not None:
            await spec.reply.withdraw()
        spec.decode.cancel()
        await asyncio.gather(spec.decode, return_exceptions=True)

    def _decode(self, audio: np.ndarray) -> asyncio.Task[tuple[str, float]]:
        """The utterance's transcript, decoded on the ASR thread (owned by a speculation or a turn)."""
        async def run() -> tuple[str, float]:
            started = time.monotonic()
            text = await self._runner.transcribe(audio, who=self.device_id)
            return text, (time.monotonic() - started) * 1000

        return asyncio.create_task(run(), name=f"decode {self.device_id}")


def _ms(audio: np.ndarray) -> float:
    """The length of an utterance's audio (at the listener's ASR rate), in ms."""
    return 1000 * audio.size / ASR_RATE
