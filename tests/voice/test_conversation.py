"""A Conversation driven directly on the fake engines (the real Listener, endpointing, Speaker and
pacing; a scripted brain): text input, barge-in within one chunk, speculative decodes kept or
dropped, push-to-talk stop."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from firmware_protocol import AudioChunk, AudioFormat, AudioStart, AudioStop, Message, ReplyText, StopReason, \
    Transcript, VadEvent
from gateway.audio.pcm import float_to_s16le, resample
from gateway.config import parse_config
from gateway.voice.conversation import Conversation
from gateway.voice.events import TurnEvent, TurnEvents, TurnFinished, TurnMetrics
from gateway.voice.wire import to_device
from tests.voice.scripted_brain import ScriptedBrain

pytestmark = pytest.mark.asyncio(loop_scope="session")

ROOT = Path(__file__).resolve().parents[2]
MIC = 16000
STORY = ["Once upon a time there was a small robot that lived in a very big house.",
         "It cleaned every floor.", "Then it slept."]


def answers(utterance: str) -> list[str]:
    if "story" in utterance:
        return STORY
    return [f"You said {utterance}", "Anything else?"]


class Device:
    """What the conversation sent, with a bounded wait for the next message that matters."""

    def __init__(self) -> None:
        self.sent: list[Message] = []
        self._changed = asyncio.Condition()

    async def send(self, message: Message) -> None:
        async with self._changed:
            self.sent.append(message)
            self._changed.notify_all()

    async def until(self, wanted: Callable[[Message], bool], after: int = 0, timeout: float = 10) -> int:
        """Index of the first message from `after` on that is `wanted`, once it was sent."""
        async with asyncio.timeout(timeout), self._changed:
            while True:
                for i in range(after, len(self.sent)):
                    if wanted(self.sent[i]):
                        return i
                await self._changed.wait()

    def of(self, kind: type) -> list:
        return [m for m in self.sent if isinstance(m, kind)]


class Reports:
    """The turns' metrics as the conversation reports them (`TurnFinished`, after the closing ReplyText)."""

    def __init__(self) -> None:
        self.turns: list[TurnMetrics] = []
        self._more = asyncio.Event()

    async def __call__(self, event: TurnEvent) -> None:
        if isinstance(event, TurnFinished):
            self.turns.append(event.metrics)
            self._more.set()

    async def wait(self, count: int, timeout: float = 10) -> list[TurnMetrics]:
        async with asyncio.timeout(timeout):
            while len(self.turns) < count:
                self._more.clear()
                await self._more.wait()
        return self.turns


def final(m: Message) -> bool:
    return isinstance(m, ReplyText) and m.final


def conversation(fake_runner, brain: ScriptedBrain, dev: Device, metrics: Reports,
                 speculate: bool = False, prebuffer_ms: int = 5000) -> Conversation:
    """prebuffer_ms 5000 sends a short reply at once; 300 (the default) paces it like a real device."""
    cfg = parse_config({"brain": {"speculate": speculate}, "audio": {"prebuffer_ms": prebuffer_ms}}, ROOT)
    return Conversation("box-1", "test", cfg, fake_runner, brain, dev.send, AudioFormat(sample_rate=MIC),
                        AudioFormat(sample_rate=16000), TurnEvents([to_device(dev.send), metrics]))


async def say(conv: Conversation, audio: np.ndarray) -> None:
    """Microphone audio in 20 ms chunks, as fast as the conversation takes them."""
    for i in range(0, len(audio), MIC // 50):
        await conv.on_audio(float_to_s16le(audio[i : i + MIC // 50]))


def words(fake_speak, text: str, lead_in: bool = True) -> np.ndarray:
    audio, rate = fake_speak(text)
    audio = resample(audio, rate, MIC)
    return audio if lead_in else audio[int(0.3 * MIC):]


def silence(ms: int) -> np.ndarray:
    return np.zeros(MIC * ms // 1000, np.float32)


async def test_a_text_input_is_answered_sentence_by_sentence_and_the_brain_hears_what_was_played(
        fake_runner) -> None:
    brain, dev, metrics = ScriptedBrain(answers), Device(), Reports()
    conv = conversation(fake_runner, brain, dev, metrics)
    await conv.on_text("hello")
    await dev.until(final)
    assert dev.sent[0] == Transcript(text="hello", final=True) and brain.utterances == ["hello"]
    assert [m.text for m in dev.of(ReplyText)] == ["You said hello", "Anything else?", "You said hello Anything else?"]
    assert [m.reason for m in dev.of(AudioStop)] == [StopReason.END, StopReason.END]
    assert brain.played == ["You said hello Anything else?"]
    assert [(m.transcript, m.barged_in) for m in await metrics.wait(1)] == [("hello", False)]
    await conv.close()


async def test_a_text_during_a_reply_aborts_it_and_is_answered_next(fake_runner) -> None:
    brain, dev, metrics = ScriptedBrain(answers), Device(), Reports()
    conv = conversation(fake_runner, brain, dev, metrics, prebuffer_ms=300)
    await conv.on_text("tell me a story")
    await dev.until(lambda m: isinstance(m, AudioChunk) and m.seq == 8)
    await conv.on_text("stop")
    aborted = await dev.until(lambda m: isinstance(m, AudioStop) and m.reason == StopReason.ABORTED)
    assert final(dev.sent[aborted + 1]) and dev.sent[aborted + 1].text == STORY[0]  # only what was played
    await dev.until(final, after=aborted + 2)
    assert brain.utterances == ["tell me a story", "stop"] and brain.played == [STORY[0], "You said stop Anything else?"]
    assert [m.barged_in for m in await metrics.wait(2)] == [True, False]
    await conv.close()


async def test_speaking_over_the_reply_stops_it_within_one_chunk_and_the_question_is_answered(
        fake_runner, fake_speak) -> None:
    brain, dev, metrics = ScriptedBrain(answers), Device(), Reports()
    conv = conversation(fake_runner, brain, dev, metrics, prebuffer_ms=300)
    await conv.on_text("tell me a story")
    await dev.until(lambda m: isinstance(m, AudioChunk) and m.seq == 8)  # past the burst: paced now
    await say(conv, np.concatenate([words(fake_speak, "What time is it?"), silence(700)]))
    start = await dev.until(lambda m: isinstance(m, VadEvent) and m.event == VadEvent.SPEECH_START)
    aborted = await dev.until(lambda m: isinstance(m, AudioStop) and m.reason == StopReason.ABORTED)
    assert start < aborted and sum(isinstance(m, AudioChunk) for m in dev.sent[start:aborted]) <= 1
    assert final(dev.sent[aborted + 1]) and dev.sent[aborted + 1].text == STORY[0]
    answered = await dev.until(final, after=aborted + 2)
    assert dev.sent[answered].text == "You said What time is it? Anything else?"
    assert [m.text for m in dev.of(Transcript)] == ["tell me a story", "What time is it?"]
    assert [m.barged_in for m in await metrics.wait(2)] == [True, False]
    await conv.close()


async def test_the_speculative_decode_is_the_transcript_when_the_endpoint_follows(fake_runner, fake_speak) -> None:
    brain, dev, metrics = ScriptedBrain(answers), Device(), Reports()
    conv = conversation(fake_runner, brain, dev, metrics)
    await say(conv, np.concatenate([words(fake_speak, "What time is it?"), silence(700)]))
    await dev.until(final)
    assert [m.event for m in dev.of(VadEvent)] == [VadEvent.SPEECH_START, VadEvent.SPEECH_END]
    assert [m.text for m in dev.of(Transcript)] == ["What time is it?"]
    assert [(m.transcript, m.speculative, m.speculative_reply) for m in await metrics.wait(1)] == [("What time is it?", True, False)]
    await conv.close()


async def test_a_resumed_utterance_drops_the_speculative_decode_and_withdraws_the_early_reply(
        fake_runner, fake_speak) -> None:
    brain, dev, metrics = ScriptedBrain(answers, speculates=True), Device(), Reports()
    conv = conversation(fake_runner, brain, dev, metrics, speculate=True)
    await say(conv, np.concatenate([words(fake_speak, "What is the"), silence(250)]))  # > 120, < 500 ms
    await asyncio.wait_for(brain.asked.wait(), 10)  # the brain was asked on "What is the" already
    await say(conv, np.concatenate([words(fake_speak, "capital", lead_in=False), silence(700)]))
    await dev.until(final)
    assert brain.utterances == ["What is the", "What is the capital"] and brain.withdrawn == 1
    assert [m.text for m in dev.of(Transcript)] == ["What is the capital"]
    assert [m.text for m in dev.of(ReplyText)][-1] == "You said What is the capital Anything else?"
    assert brain.played == ["You said What is the capital Anything else?"]
    assert [(m.speculative, m.speculative_reply) for m in await metrics.wait(1)] == [(True, True)]
    await conv.close()


async def test_push_to_talk_stop_ends_the_utterance_at_once_and_a_stop_without_speech_does_nothing(
        fake_runner, fake_speak) -> None:
    brain, dev, metrics = ScriptedBrain(answers), Device(), Reports()
    conv = conversation(fake_runner, brain, dev, metrics)
    await conv.on_audio_stop()
    await say(conv, np.concatenate([words(fake_speak, "Turn on the light"), silence(100)]))  # no endpoint yet
    assert [m.event for m in dev.of(VadEvent)] == [VadEvent.SPEECH_START]
    await conv.on_audio_stop()  # the button is released
    assert [m.event for m in dev.of(VadEvent)] == [VadEvent.SPEECH_START, VadEvent.SPEECH_END]
    await dev.until(final)
    assert [m.text for m in dev.of(Transcript)] == ["Turn on the light"]
    assert len(dev.of(AudioStart)) == 2 and brain.utterances == ["Turn on the light"]
    await conv.on_audio_stop()  # a second release: no utterance runs, nothing is sent
    await say(conv, silence(700))
    assert len(dev.of(Transcript)) == 1 and len(await metrics.wait(1)) == 1
    await conv.close()


def ptt_conversation(fake_runner, brain: ScriptedBrain, dev: Device) -> Conversation:
    cfg = parse_config({"listen": {"mode": "ptt"}}, ROOT)
    return Conversation("box-1", "test", cfg, fake_runner, brain, dev.send, AudioFormat(sample_rate=MIC),
                        AudioFormat(sample_rate=16000), TurnEvents([to_device(dev.send)]), mode="ptt")


async def test_ptt_hears_turns_only_between_the_boxs_audio_start_and_stop(fake_runner, fake_speak) -> None:
    brain, dev = ScriptedBrain(answers), Device()
    conv = ptt_conversation(fake_runner, brain, dev)
    try:
        await say(conv, np.concatenate([words(fake_speak, "Tell me a story"), silence(900)]))  # button not held
        assert dev.sent == [] and brain.utterances == []
        conv.on_audio_start()  # pressed
        await say(conv, np.concatenate([words(fake_speak, "What time is it"), silence(900)]))  # endpointed by the VAD
        await dev.until(final)
        await say(conv, np.concatenate([words(fake_speak, "Turn on the light"), silence(100)]))
        await conv.on_audio_stop()  # released before the VAD's endpoint: the utterance ends there
        await dev.until(final, after=dev.sent.index(dev.of(ReplyText)[-1]) + 1)
        await say(conv, np.concatenate([words(fake_speak, "Tell me a joke"), silence(900)]))  # released: not heard
        assert brain.utterances == ["What time is it", "Turn on the light"]
        assert [m.text for m in dev.of(Transcript)] == ["What time is it", "Turn on the light"]
    finally:
        await conv.close()


async def test_a_spoken_stop_word_is_no_turn_and_sends_no_transcript(fake_runner, fake_speak) -> None:
    brain, dev, metrics = ScriptedBrain(answers), Device(), Reports()
    conv = conversation(fake_runner, brain, dev, metrics, prebuffer_ms=300)
    try:
        await conv.on_text("tell me a story")
        await dev.until(lambda m: isinstance(m, AudioChunk) and m.seq == 8)
        await say(conv, np.concatenate([words(fake_speak, "stop"), silence(900)]))
        await dev.until(lambda m: isinstance(m, AudioStop) and m.reason == StopReason.ABORTED)
        await say(conv, silence(300))
        assert [m.text for m in dev.of(Transcript)] == ["tell me a story"]  # no empty one for "stop"
        assert brain.utterances == ["tell me a story"]
        assert [m.transcript for m in await metrics.wait(1)] == ["tell me a story"]  # no turn's metrics
    finally:
        await conv.close()


async def test_a_reply_cut_by_the_connection_closing_is_logged_as_such_not_as_a_barge_in(fake_runner, caplog) -> None:
    brain, dev, metrics = ScriptedBrain(answers), Device(), Reports()
    conv = conversation(fake_runner, brain, dev, metrics, prebuffer_ms=300)
    await conv.on_text("tell me a story")
    await dev.until(lambda m: isinstance(m, AudioChunk) and m.seq == 8)
    with caplog.at_level("INFO", logger="gateway.voice.replier"):
        await conv.close()  # the device went away mid-reply
    [m] = await metrics.wait(1)
    assert m.transcript == "tell me a story" and m.barged_in  # the reply was cut short
    [line] = [r.getMessage() for r in caplog.records if "heard 'tell me a story'" in r.getMessage()]
    assert line.endswith("[connection closed]")
