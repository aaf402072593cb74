"""The replying half of a conversation: one turn at a time from transcript to the end of its reply.

A turn waits for its transcript (a decode the conversation started), asks the brain session,
speaks the sentences (the Speaker; each one's `SentenceStarted` comes from its `on_start`) and
publishes the turn's events (gateway/voice/events.py): `Transcribed`, `ReplyEnded` (or `TurnFailed`) and `TurnFinished`
with its metrics. `interrupt` cancels the running turn within one chunk and publishes `BargedIn`,
the `ReplyEnded` of what was played and the turn's metrics. The brain session hears what was
played (`spoken`) after the reply ended or was interrupted. An announcement (an alert) publishes
its `ReplyEnded`, or, when it cannot be said (its TTS failed, the gateway was busy, the link
closed), a log line with its traceback and `TurnFailed`, like a failed reply.

A decode that raises `NoTurn` (the transcript was a stop word, gateway/voice/stop_check.py) makes
no turn: nothing of it is published (no `Transcribed`, so the device gets no empty Transcript; no
`TurnFinished`), the brain is not asked, and every other reply still running stops.

Every task is owned: a turn's task, its decode and its speculative reply are cancelled and awaited
when it is interrupted, replaced or closed (`Turn.stop`); `close` ends them all.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Coroutine
from typing import Any
from dataclasses import dataclass
from datetime import datetime

from gateway.brain.contract import BrainContext, BrainSession, Sentence, sentences_of
from gateway.errors import GatewayError
from gateway.voice.events import (BargedIn, ReplyEnded, Transcribed, TurnEvents, TurnFailed,
                                  TurnFinished, TurnMetrics)
from gateway.voice.speaker import Playback, Speaker
from gateway.voice.speculation import SpeculativeReply

log = logging.getLogger(__name__)

Decode = asyncio.Future[tuple[str, float]]  # (transcript, decode compute ms)


class NoTurn(Exception):
    """Raised by a turn's decode: the utterance is no turn after all; its text says why (a stop word)."""


@dataclass(eq=False)
class Turn:
    """One reply and what it owns."""

    play: Playback
    metrics: TurnMetrics | None = None  # None: an announcement (no transcript, no metrics)
    decode: Decode | None = None
    reply: SpeculativeReply | None = None  # the brain asked before the endpoint
    task: asyncio.Task[None] | None = None

    @property
    def running(self) -> bool:
        return self.task is not None and not self.task.done()

    async def stop(self) -> None:
        """Cancel and await the turn's task and decode, close its speculative reply (idempotent)."""
        pending = [f for f in (self.task, self.decode) if f is not None]
        for future in pending:
            future.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        if self.reply is not None:
            await self.reply.close()


class Replier:
    def __init__(self, device_id: str, peer: str, brain: BrainSession, speaker: Speaker, events: TurnEvents) -> None:
        self._device_id = device_id
        self._peer = peer
        self._brain = brain
        self._speaker = speaker
        self._events = events
        self._turn: Turn | None = None
        self._turns: set[Turn] = set()  # running (one, unless vad.barge_in is off)

    def answer(self, decode: Decode, metrics: TurnMetrics, reply: SpeculativeReply | None = None) -> None:
        """Start the turn that replies to the transcript `decode` will give."""
        turn = Turn(Playback(), metrics, decode, reply)
        self._start(turn, self._run_turn(turn))

    async def announce(self, text: str) -> None:
        """Speak `text` now (an announcement, an alert), interrupting any reply in progress."""
        await self.interrupt("announcement")
        turn = Turn(Playback())
        self._start(turn, self._announce(text, turn.play))

    def _start(self, turn: Turn, run: Coroutine[Any, Any, None]) -> None:
        self._turn = turn
        self._turns.add(turn)
        turn.task = asyncio.create_task(run, name=f"turn {self._device_id}")
        turn.task.add_done_callback(lambda _: self._turns.discard(turn))

    async def interrupt(self, reason: str) -> None:
        """Barge-in: stop the reply within one chunk and publish what was played of it."""
        turn = self._turn
        if turn is not None and turn.running:
            await self._stop(turn, reason)

    async def _stop(self, turn: Turn, reason: str) -> None:
        await turn.stop()
        log.info("%s (%s): reply interrupted: %s", self._peer, self._device_id, reason)
        await self._events.publish(BargedIn(self._device_id, reason, turn.play.open_stream))
        await self._events.publish(ReplyEnded(self._device_id, turn.play.shown(), turn.play.said(), aborted=True))
        if turn.metrics is not None and turn.metrics.transcript:
            await self._finished(turn.metrics)

    async def close(self) -> None:
        """End every turn (the connection is gone): cancelled and awaited, only their metrics published."""
        for turn in list(self._turns):
            await turn.stop()
            if turn.metrics is not None and turn.metrics.transcript:
                await self._finished(turn.metrics, "connection closed")

    async def _announce(self, text: str, play: Playback) -> None:
        async def sentences() -> AsyncIterator[Sentence]:
            for sentence in sentences_of(text):
                yield sentence

        try:
            await self._speaker.speak(sentences(), play)
            await self._events.publish(ReplyEnded(self._device_id, play.shown(), play.said()))
        except Exception as exc:  # stage boundary: an alert that cannot be said is logged and reported
            await self._failed(exc, f"announcement {text!r}")

    async def _failed(self, exc: Exception, what: str) -> None:
        """A reply or an announcement failed: logged once with its traceback and published as
        `TurnFailed` (an Error to the device); the session goes on."""
        code, text = (exc.code, exc.text) if isinstance(exc, GatewayError) else ("internal-error", f"the {what} failed: {exc}")
        log.error("%s (%s): %s: the %s failed", self._peer, self._device_id, code, what, exc_info=exc)
        try:
            await self._events.publish(TurnFailed(self._device_id, code, text))
        except Exception as unsent:  # the device's link may be what failed: the line above stays
            log.warning("%s (%s): %s not reported to the device: %s", self._peer, self._device_id, code, unsent)

    async def _run_turn(self, turn: Turn) -> None:
        m, play, reply = turn.metrics, turn.play, turn.reply
        assert m is not None and turn.decode is not None
        endpoint_at = time.monotonic()
        try:
            text, m.asr_ms = await turn.decode
            m.asr_after_endpoint_ms = (time.monotonic() - endpoint_at) * 1000
            m.transcript = text
            await self._events.publish(Transcribed(self._device_id, text))
            if text:
                await self._reply(text, m, play, reply, endpoint_at)
            else:
                log.info("%s (%s): heard speech but no words", self._peer, self._device_id)
                if reply is not None:  # asked on a speculative transcript that turned out to be no turn
                    await reply.withdraw()
                    self._speaker.drop_prepared()
        except NoTurn as exc:
            log.info("%s (%s): %s: no turn", self._peer, self._device_id, exc)
            if reply is not None:  # the brain is not asked (or forgets it was)
                await reply.withdraw()
                self._speaker.drop_prepared()
            for other in [t for t in self._turns if t is not turn and t.running]:  # vad.barge_in off
                await self._stop(other, str(exc))
        except asyncio.CancelledError:
            m.barged_in = True
            m.reply = play.said()
            self._brain.spoken(m.reply)  # the brain's history keeps only what was played
            raise
        except Exception as exc:  # stage boundary: report, keep the session alive
            await self._failed(exc, "reply")
        finally:
            if reply is not None:
                await reply.close()  # after a barge-in: the brain's request must not run on
            if play.first_audio_at is not None:
                m.endpoint_to_first_audio_ms = (play.first_audio_at - endpoint_at) * 1000
            m.first_tts_ms = play.first_tts_ms or 0.0
            m.first_tts_prepared = play.first_prepared
        if m.transcript:  # not reached when interrupted: `interrupt` publishes the end
            await self._finished(m)

    async def _reply(self, text: str, m: TurnMetrics, play: Playback, reply: SpeculativeReply | None,
                     endpoint_at: float) -> None:
        brain_started = time.monotonic()
        if reply is not None:  # asked before the endpoint: its first sentence may be there already
            m.speculative_reply = True
            sentences = reply.sentences()
        else:
            sentences = self._brain.reply(text, BrainContext(self._device_id, datetime.now().astimezone(),
                                                             reports_playback=True))
        first: list[float] = []
        await self._speaker.speak(_mark_first(sentences, first, m), play)
        if first and reply is not None and reply.started is not None and reply.first_at is not None:
            brain_started, first[:1] = reply.started, [reply.first_at]
        if first:
            m.brain_ms = (first[0] - brain_started) * 1000
            m.first_sentence_after_endpoint_ms = max(0.0, (first[0] - endpoint_at) * 1000)
        m.reply = play.said()
        self._brain.spoken(m.reply)  # played to the end: the brain may remember it now
        await self._events.publish(ReplyEnded(self._device_id, play.shown(), m.reply))

    async def _finished(self, m: TurnMetrics, cut_by: str = "barge-in") -> None:
        """`cut_by`: what ended the turn early when `m.barged_in` (the log line says it)."""
        log.info(
            "%s (%s): heard %r -> %r | asr %.0f ms (%s), endpoint->first audio %.0f ms%s",
            self._peer, self._device_id, m.transcript, m.reply, m.asr_ms,
            "speculative" if m.speculative else "after endpoint", m.endpoint_to_first_audio_ms,
            f" [{cut_by}]" if m.barged_in else "",
        )
        await self._events.publish(TurnFinished(self._device_id, m))


async def _mark_first(sentences: AsyncIterator[Sentence], first: list[float], m: TurnMetrics) -> AsyncIterator[Sentence]:
    """The sentences; the first one's time goes to `first` and its source (the brain) to the metrics."""
    async for s in sentences:
        if not first:
            first.append(time.monotonic())
            m.brain = s.source
        yield s
