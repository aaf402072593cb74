"""One turn, published once: the typed events a Conversation publishes (fake engines, a scripted brain),
in order, to its awaited sinks and then on the bus; what the wire makes of them; every task of a
turn ended by close."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import numpy as np
import pytest

from firmware_protocol import AudioChunk, AudioFormat, AudioStop, Error, ReplyText, StopReason, Transcript, VadEvent
from gateway.brain.contract import BrainContext, Sentence
from gateway.bus import EventBus
from gateway.config import parse_config
from gateway.voice.conversation import Conversation
from gateway.voice.events import (BargedIn, ReplyEnded, SentenceStarted, SpeechEnded, SpeechStarted, Transcribed,
                                  TurnEvent, TurnEvents, TurnFailed, TurnFinished)
from gateway.voice.wire import to_device, wire_messages
from tests.voice.scripted_brain import ScriptedBrain
from tests.voice.test_conversation import MIC, ROOT, STORY, Device, answers, final, say, silence, words

pytestmark = pytest.mark.asyncio(loop_scope="session")


class Stream:
    """A sink that keeps every turn event, with a bounded wait for one."""

    def __init__(self) -> None:
        self.events: list[TurnEvent] = []
        self._changed = asyncio.Condition()

    async def __call__(self, event: TurnEvent) -> None:
        async with self._changed:
            self.events.append(event)
            self._changed.notify_all()

    async def until(self, kind: type, count: int = 1, timeout: float = 10) -> list[TurnEvent]:
        """The events so far, once `count` events of `kind` were published."""
        async with asyncio.timeout(timeout), self._changed:
            await self._changed.wait_for(lambda: sum(isinstance(e, kind) for e in self.events) >= count)
        return list(self.events)


def kinds(events: list[TurnEvent]) -> list[type]:
    return [type(e) for e in events]


def conversation(fake_runner, brain, dev: Device, stream: Stream, bus: EventBus | None = None,
                 prebuffer_ms: int = 5000) -> Conversation:
    cfg = parse_config({"audio": {"prebuffer_ms": prebuffer_ms}}, ROOT)
    return Conversation("box-1", "test", cfg, fake_runner, brain, dev.send, AudioFormat(sample_rate=MIC),
                        AudioFormat(sample_rate=16000), TurnEvents([to_device(dev.send), stream], bus))


async def test_a_spoken_turn_is_published_once_in_order_to_the_sinks_and_on_the_bus(fake_runner, fake_speak) -> None:
    bus = EventBus()
    on_bus = bus.subscribe(name="test")
    dev, stream = Device(), Stream()
    conv = conversation(fake_runner, ScriptedBrain(answers), dev, stream, bus)
    await say(conv, np.concatenate([words(fake_speak, "What time is it?"), silence(700)]))
    events = await stream.until(TurnFinished)
    assert kinds(events) == [SpeechStarted, SpeechEnded, Transcribed, SentenceStarted, SentenceStarted,
                             ReplyEnded, TurnFinished]
    assert all(e.device_id == "box-1" for e in events)
    started, ended = events[0], events[1]
    assert 0 < started.audio_ms < ended.audio_ms
    assert events[2] == Transcribed("box-1", "What time is it?")
    assert [(e.stream_id, e.sentence) for e in events[3:5]] == [
        (1, Sentence("You said What time is it?")), (2, Sentence("Anything else?"))]
    assert events[5] == ReplyEnded("box-1", "You said What time is it? Anything else?",
                                   "You said What time is it? Anything else?", aborted=False)
    metrics = events[6].metrics
    assert (metrics.transcript, metrics.reply, metrics.barged_in) == (
        "What time is it?", "You said What time is it? Anything else?", False)
    assert metrics.utterance_ms == pytest.approx(ended.audio_ms - started.audio_ms, abs=400)  # pre-roll, trailing silence
    assert [on_bus.queue.get_nowait() for _ in range(on_bus.queue.qsize())] == events  # the same, once each
    # the wire got the turn's messages from the same events, in their order
    assert [type(m) for m in dev.sent if not isinstance(m, AudioChunk)][:3] == [VadEvent, VadEvent, Transcript]
    assert final(dev.sent[-1]) and dev.sent[-1].text == events[5].display
    await conv.close()


async def test_a_barge_in_publishes_the_interruption_and_the_end_of_only_what_was_played(
        fake_runner, fake_speak) -> None:
    dev, stream = Device(), Stream()
    brain = ScriptedBrain(answers)
    conv = conversation(fake_runner, brain, dev, stream, prebuffer_ms=300)
    await conv.on_text("tell me a story")
    await dev.until(lambda m: isinstance(m, AudioChunk) and m.seq == 8)  # paced: the first sentence plays
    await say(conv, np.concatenate([words(fake_speak, "What time is it?"), silence(700)]))
    events = await stream.until(TurnFinished, 2)
    first = events[:events.index(next(e for e in events if isinstance(e, TurnFinished))) + 1]
    assert kinds(first) == [Transcribed, SentenceStarted, SpeechStarted, BargedIn, ReplyEnded, TurnFinished]
    assert first[1].sentence == Sentence(STORY[0]) and first[1].stream_id == 1
    assert first[3] == BargedIn("box-1", "the user started speaking", stream_id=1)
    assert first[4] == ReplyEnded("box-1", STORY[0], STORY[0], aborted=True)  # not the sentences never played
    assert first[5].metrics.barged_in and first[5].metrics.reply == STORY[0]
    rest = events[len(first):]
    assert kinds(rest) == [SpeechEnded, Transcribed, SentenceStarted, SentenceStarted, ReplyEnded, TurnFinished]
    assert rest[1].text == "What time is it?" and not rest[4].aborted
    # the wire: AudioStop(ABORTED) of the cut stream, then the closing ReplyText of what was played
    aborted = await dev.until(lambda m: isinstance(m, AudioStop) and m.reason == StopReason.ABORTED)
    assert dev.sent[aborted].stream_id == 1 and dev.sent[aborted + 1] == ReplyText(text=STORY[0], final=True)
    await conv.close()


async def test_a_reply_shows_its_display_text_and_remembers_its_speech(fake_runner) -> None:
    class Emoji(ScriptedBrain):
        async def reply(self, utterance: str, ctx: BrainContext) -> AsyncIterator[Sentence]:
            yield Sentence("Sure, here it is.", display="😊 Sure, here it is: https://example.org")

    dev, stream = Device(), Stream()
    brain = Emoji(answers)
    conv = conversation(fake_runner, brain, dev, stream)
    await conv.on_text("the link please")
    events = await stream.until(TurnFinished)
    assert events[-2] == ReplyEnded("box-1", "😊 Sure, here it is: https://example.org", "Sure, here it is.")
    assert brain.played == ["Sure, here it is."] and dev.sent[-1].text == events[-2].display
    await conv.close()


async def test_an_announcement_publishes_its_sentences_and_its_end_but_no_turn_metrics(fake_runner) -> None:
    dev, stream = Device(), Stream()
    conv = conversation(fake_runner, ScriptedBrain(answers), dev, stream)
    await conv.say("Dinner is ready. Come to the kitchen.")
    events = await stream.until(ReplyEnded)
    assert kinds(events) == [SentenceStarted, SentenceStarted, ReplyEnded]
    assert events[-1].display == "Dinner is ready. Come to the kitchen."
    await conv.close()
    assert not any(isinstance(e, TurnFinished) for e in stream.events)


async def test_the_wire_sends_the_vad_events_transcript_abort_closing_text_and_errors_and_nothing_for_the_rest() -> None:
    assert wire_messages(SpeechStarted("d", 320)) == [VadEvent(event=VadEvent.SPEECH_START, audio_ms=320)]
    assert wire_messages(SpeechEnded("d", 960)) == [VadEvent(event=VadEvent.SPEECH_END, audio_ms=960)]
    assert wire_messages(Transcribed("d", "hi")) == [Transcript(text="hi", final=True)]
    assert wire_messages(BargedIn("d", "abort", 3)) == [AudioStop(stream_id=3, reason=StopReason.ABORTED)]
    assert wire_messages(BargedIn("d", "abort", None)) == []  # between two sentences: no stream to stop
    assert wire_messages(ReplyEnded("d", "shown", "said", aborted=True)) == [ReplyText(text="shown", final=True)]
    assert wire_messages(TurnFailed("d", "tts-failed", "no voice")) == [Error(code="tts-failed", text="no voice")]
    assert wire_messages(SentenceStarted("d", 1, Sentence("x"))) == []


async def test_each_sink_is_awaited_in_order_before_the_bus_and_the_next_event() -> None:
    bus = EventBus()
    on_bus = bus.subscribe(name="test")
    seen: list[str] = []
    release = asyncio.Event()

    async def slow(event: TurnEvent) -> None:
        seen.append(f"slow {type(event).__name__}")
        await release.wait()

    async def second(event: TurnEvent) -> None:
        seen.append(f"second {type(event).__name__}; bus has {on_bus.queue.qsize()}")

    events = TurnEvents([slow, second], bus)
    publishing = asyncio.create_task(events.publish(Transcribed("d", "hi")))
    await asyncio.sleep(0)  # one loop step: the first sink waits, nothing else has happened
    assert seen == ["slow Transcribed"] and on_bus.queue.empty()
    release.set()
    await asyncio.wait_for(publishing, 5)
    assert seen == ["slow Transcribed", "second Transcribed; bus has 0"] and on_bus.queue.get_nowait() == Transcribed("d", "hi")


def running(name: str) -> set[asyncio.Task]:
    return {t for t in asyncio.all_tasks() if t.get_name() == name and not t.done()}


async def test_close_cancels_and_awaits_the_running_turn_and_publishes_its_metrics(fake_runner) -> None:
    dev, stream = Device(), Stream()
    conv = conversation(fake_runner, ScriptedBrain(answers), dev, stream, prebuffer_ms=300)
    await conv.on_text("tell me a story")
    await dev.until(lambda m: isinstance(m, AudioChunk) and m.seq == 8)
    turn = running("turn box-1")
    assert len(turn) == 1
    await conv.close()
    assert all(t.done() for t in turn) and not running("turn box-1")
    assert kinds(stream.events) == [Transcribed, SentenceStarted, TurnFinished]  # nothing more for the wire
    assert stream.events[-1].metrics.barged_in and stream.events[-1].metrics.reply == STORY[0]


class HeldAsr:
    """The fake engines, with transcriptions that wait until `release` is set."""

    def __init__(self, runner) -> None:
        self._runner = runner
        self.vad = runner.vad
        self.release = asyncio.Event()

    async def vad_windows(self, detector, windows):
        return await self._runner.vad_windows(detector, windows)

    async def transcribe(self, audio, **kw) -> str:
        await self.release.wait()
        return await self._runner.transcribe(audio, **kw)

    async def synthesize(self, text: str, **kw):
        return await self._runner.synthesize(text, **kw)


async def test_close_cancels_and_awaits_a_speculative_decode(fake_runner, fake_speak) -> None:
    dev, stream = Device(), Stream()
    conv = conversation(HeldAsr(fake_runner), ScriptedBrain(answers), dev, stream)
    await say(conv, np.concatenate([words(fake_speak, "What is the"), silence(250)]))  # > 120, < 500 ms
    decode = running("decode box-1")
    assert len(decode) == 1 and kinds(stream.events) == [SpeechStarted]  # decoding, no endpoint yet
    await conv.close()
    assert all(t.cancelled() for t in decode) and not running("decode box-1")
