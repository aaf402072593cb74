"""One device's spoken conversation: listen -> transcribe -> decide -> speak, with barge-in.

Timeline of a turn (the latency trick): when trailing silence starts (SPECULATE), the utterance is
decoded right away on the ASR thread while the endpointer keeps counting silence. If the user
resumes, that result is dropped; if the endpoint is confirmed, the transcript is usually ready
already, so the reply starts within a TTS call of the endpoint decision. When the brain session
`speculates` (the LLM, local and memory brains) and `brain.speculate` is on, it is asked on that
speculative transcript too, so an LLM's first sentence is often there by the endpoint
(gateway/voice/speculation.py), and the Speaker synthesizes that sentence's first piece during
the rest of the wait (`Speaker.prepare`); a resumed utterance withdraws that reply
(`session.withdraw()`), cancels its request and drops the prepared audio.

Listen modes (`listen.mode`, gateway/voice/listen_mode.py): in `wake` / `follow-up` the listener
also runs the device's wake-word detector; an utterance is a turn only when addressed (the wake word
in it: the question is the audio after the word; or a woken / follow-up window open), and only then
does the device hear VadEvents and a Transcript. A wake word during a reply is a barge-in; speech
that is not addressed during a reply is transcribed only to look for a stop word, and a transcript
that is only a stop word ends the reply and starts no turn (gateway/voice/stop_check.py). The listen
state changes are published as `ListenChanged` (the box's ListenState, the screens). Echo-proof
barge-in (gateway/voice/echo_guard.py): the box's own echo of the reply is no speech of the user: no
barge-in, no turn, until a voice is heard over it.

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
from datetime import datetime

import numpy as np

from firmware_protocol import AudioFormat
from gateway.audio.pcm import s16le_to_float
from gateway.brain.contract import BrainContext, BrainSession, Sentence
from gateway.config import GatewayConfig
from gateway.config.listen import ListenModeName
from gateway.engines.base import VadEngine
from gateway.engines.runner import EngineRunner
from gateway.engines.wake_word import WakeWordDetector
from gateway.voice.echo_guard import EchoGuard, Ended
from gateway.voice.endpointing import Endpointer, Event
from gateway.voice.events import (BargedIn, ListenChanged, ReplyEnded, SentenceStarted, SpeechEnded, SpeechStarted,
                                  TurnEvent, TurnEvents, TurnMetrics, WatchedEvents)
from gateway.voice.listen_mode import Listening, ListenMode, Outcome, StopWords, Verdict
from gateway.voice.listener import ASR_RATE, Listener, Woke
from gateway.voice.replier import Decode, Replier
from gateway.voice.speaker import Send, SentenceHook, Speaker
from gateway.voice.speculation import Speculation, SpeculativeReply
from gateway.voice.stop_check import StopCheck

log = logging.getLogger(__name__)

__all__ = ["Conversation", "TurnMetrics"]


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
        wake: WakeWordDetector | None = None,  # this session's wake-word state (runner.wake_detector())
        mode: ListenModeName | None = None,  # this device's listen mode (default: listen.mode)
    ) -> None:
        """`send` carries the reply's audio streams; everything else the device is told comes from
        the turn `events` (whose sinks include the wire, gateway/voice/wire.py)."""
        self.device_id = device_id
        self._cfg = cfg
        lc = cfg.listen
        self._listen = ListenMode(mode or lc.mode, lc.wake_window_s * 1000, lc.follow_up_s * 1000)
        if self._listen.needs_wake_word and wake is None:
            raise ValueError(f"listen mode {self._listen.mode} needs a wake-word detector")
        self._stop = StopCheck(device_id, StopWords(lc.stop_words), runner, self.interrupt)
        self._announced = False  # the current utterance is addressed: the device heard SpeechStarted
        self._told = False  # the device was told its first listen state
        self._ptt_noted = False  # the log said once that audio outside the button's hold is ignored
        events = WatchedEvents(events, self._watch)  # the Replier's ReplyEnded move the listen state
        self._runner = runner
        self._brain = brain
        self._events = events
        self._in = audio_in
        v = cfg.vad
        self._listener = Listener(
            runner,
            vad if vad is not None else runner.vad.clone(),
            Endpointer(v.min_speech_ms, v.trailing_silence_ms, v.speculative_after_ms, v.max_utterance_s * 1000, v.relative_drop_db),
            audio_in.sample_rate,
            v.preroll_ms,
            wake=wake if self._listen.needs_wake_word else None,
        )
        self._echo = EchoGuard(self._listener, self._listen, lc, audio_out.sample_rate,
                               lambda audio: runner.transcribe(audio, who=device_id), who=device_id)

        async def started(sentence: Sentence, stream_id: int) -> None:
            self._listen.reply_started()
            self._echo.playing(sentence.speech)
            await events.publish(SentenceStarted(device_id, stream_id, sentence))

        self._speaker = Speaker(runner, self._echo.tap(send), audio_out, cfg.audio.chunk_ms, cfg.audio.prebuffer_ms,
                                on_sentence=on_sentence, on_start=started, who=device_id)
        self._replier = Replier(device_id, peer, brain, self._speaker, events)
        self._spec: Speculation | None = None
        self._speculate_reply = cfg.brain.speculate and brain.speculates

    # ---- inbound -------------------------------------------------------------------------
    async def on_audio(self, data: bytes) -> None:
        if not self._listen.hears:  # ptt, the button not held: not listened to
            if not self._ptt_noted:
                self._ptt_noted = True
                log.info("%s: listen mode ptt: microphone audio outside AudioStart..AudioStop is ignored",
                         self.device_id)
            return
        samples = s16le_to_float(data, self._in.channels)
        seconds = samples.size / self._in.sample_rate
        self._echo.received(seconds)
        if not self._told:
            self._told = True
            if self._listen.needs_wake_word:
                await self._tell(self._listen.state, "")
        for heard in await self._listener.feed(samples):
            if isinstance(heard, Woke):
                await self._on_wake(heard)
            else:
                await self._on_event(heard.event, heard.audio_ms)
        if (change := self._listen.advance(self._listener.position_ms)) is not None:
            await self._tell(change, "")
        if await self._echo.heard(samples, seconds):  # taken for the echo so far, but a voice is over it
            await self._speech_over_echo()

    def on_audio_start(self) -> None:
        """The device started its microphone stream (AudioStart; in `ptt`: the button is pressed)."""
        self._listen.mic_opened()

    async def on_audio_stop(self) -> None:
        """The device ended its audio stream (push-to-talk released): the utterance ends now."""
        self._listen.mic_closed()
        running = self._listener.in_speech
        self._listener.force_endpoint()
        if running and self._listener.utterance_audio().size:
            await self._drop_speculation()
            at = self._listener.position_ms
            await self._utterance_ended(self._listen.utterance(self._listener.utterance_start_ms, at), at, 0.0)

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
        await self._stop.close()
        await self._echo.close()
        await self._replier.close()
        await self._drop_speculation()
        self._speaker.drop_prepared()

    # ---- listening ----------------------------------------------------------------------
    async def _on_event(self, event: Event, audio_ms: float) -> None:
        if event is Event.SPEECH_START:
            echo = await self._echo.speech_started(audio_ms)
            self._announced = not echo and self._listen.is_open(self._listener.utterance_start_ms)
            if not self._announced:
                return  # not addressed (yet): a wake word in it may still address it
            await self._events.publish(SpeechStarted(self.device_id, int(audio_ms)))
            if self._cfg.vad.barge_in:
                await self.interrupt("the user started speaking")
        elif event is Event.SPECULATE:
            if not self._announced:
                return  # decoded at the endpoint if at all
            decode = self._stop.screened(self._decode(self._question_audio()))
            reply = None
            if self._speculate_reply:
                ctx = BrainContext(self.device_id, datetime.now().astimezone(), reports_playback=True)
                reply = SpeculativeReply(self._brain, ctx, decode, on_first=self._speaker.prepare)
            self._spec = Speculation(decode, reply=reply)
        elif event is Event.RESUMED:
            await self._drop_speculation()  # stale: its decode is cancelled (the thread's result is ignored)
        elif event is Event.ENDPOINT:
            wait = float(self._cfg.vad.trailing_silence_ms)
            start = self._listener.utterance_start_ms
            outcome = self._listen.utterance(start, max(start, audio_ms - wait))
            await self._utterance_ended(outcome, audio_ms, wait)

    async def _utterance_ended(self, outcome: Outcome, audio_ms: float, wait_ms: float) -> None:
        """The utterance is over: a turn (its question audio), a stop-word check, or nothing."""
        audio = self._question_audio(outcome.cut_ms)
        log.debug("%s: utterance %s, cut %.0f ms, question %.0f ms, start %.0f", self.device_id, outcome.verdict,
                  outcome.cut_ms, _ms(audio), self._listener.utterance_start_ms)
        whole = self._listener.utterance_audio()
        self._listener.end_utterance()
        announced, self._announced = self._announced, False
        ended = await self._echo.utterance_ended()
        if ended is Ended.ECHO:  # the reply's own echo from start to end: nobody spoke
            log.info("%s: the reply's own echo (%.1f s): no barge-in, no turn", self.device_id, _ms(whole) / 1000)
            outcome = Outcome(Verdict.DROP)
        elif ended is Ended.VOICE_AT_END and not announced:  # its words were not the reply's: a voice
            await self._speech_over_echo()
            announced, self._announced = self._announced, False
        if outcome.verdict is not Verdict.TURN:
            await self._drop_speculation()
            if outcome.verdict is Verdict.CHECK_STOP:
                self._stop.check(whole)
            return
        if not announced:  # addressed at its end only (a wake word alone opened no window)
            await self._events.publish(SpeechStarted(self.device_id, int(self._listener.utterance_start_ms)))
        await self._events.publish(SpeechEnded(self.device_id, int(audio_ms)))
        metrics = TurnMetrics(self.device_id, utterance_ms=_ms(audio), endpoint_wait_ms=wait_ms)
        spec, self._spec = self._spec, None
        if spec is not None:  # the turn owns the speculative decode (and reply) from here on
            metrics.speculative = True
            self._replier.answer(spec.decode, metrics, spec.reply)  # screened for a stop word already
        else:
            self._replier.answer(self._stop.screened(self._decode(audio)), metrics)

    async def _on_wake(self, woke: Woke) -> None:
        log.info("%s: wake word %s at %.0f ms of audio", self.device_id, woke.word, woke.audio_ms)
        change = self._listen.wake(woke.audio_ms)
        if change is None and self._listen.state is not Listening.WOKEN:
            return  # always / ptt: a wake word changes nothing
        await self.interrupt(f"wake word {woke.word}")  # a reply playing or on its way: barge-in
        self._echo.forget()
        await self._drop_speculation()  # decoded before the wake word: it would hold the word itself
        if self._listener.in_speech and not self._announced:
            self._announced = True
            await self._events.publish(SpeechStarted(self.device_id, int(woke.audio_ms)))
        await self._tell(Listening.WOKEN, woke.word)

    def _question_audio(self, cut_ms: float | None = None) -> np.ndarray:
        """The current utterance's audio from where its question starts (after a wake word in it)."""
        audio = self._listener.utterance_audio()
        if cut_ms is None:
            wake, start = self._listen.wake_at_ms, self._listener.utterance_start_ms
            cut_ms = wake - start if wake is not None and wake >= start else 0.0
        return audio[int(cut_ms * ASR_RATE / 1000):]

    async def _speech_over_echo(self) -> None:
        """An utterance taken for the reply's echo turns out to be a voice over it: speech after all."""
        now = self._listener.position_ms
        if self._listen.is_open(self._listener.utterance_start_ms):
            self._announced = True
            await self._events.publish(SpeechStarted(self.device_id, int(now)))
            if self._cfg.vad.barge_in:
                await self.interrupt("the user started speaking over the reply (not its echo)")

    async def _tell(self, state: Listening, word: str) -> None:
        await self._events.publish(ListenChanged(self.device_id, state.name.lower(), word,
                                                 int(self._listener.position_ms)))

    async def _watch(self, event: TurnEvent) -> None:
        if isinstance(event, BargedIn):
            self._echo.reply_cut()
        if isinstance(event, ReplyEnded):
            self._echo.reply_ended(self._listener.position_ms)
            change = self._listen.reply_ended(self._listener.position_ms, event.aborted)
            if change is not None:
                await self._tell(change, "")

    async def _drop_speculation(self) -> None:
        """Forget the speculative decode: its early reply withdrawn, the decode cancelled and awaited."""
        spec, self._spec = self._spec, None
        if spec is not None:
            await spec.drop(self._speaker.drop_prepared)

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
