"""A reply's first piece synthesized ahead (`Speaker.prepare`, on the speculative reply during the
endpoint wait) on the fake engines: the reply that begins with it takes that audio instead of a second
synthesis; a preparation of another text or a withdrawn one is cancelled and never heard."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import numpy as np
import pytest

from firmware_protocol import AudioChunk, AudioFormat, Message, ReplyText
from gateway.audio.pcm import s16le_to_float
from gateway.brain.contract import Sentence
from gateway.engines.fake import FakeAsr
from gateway.voice.pieces import synthesis_pieces
from gateway.voice.speaker import Playback, Speaker
from tests.voice.scripted_brain import ScriptedBrain
from tests.voice.test_conversation import Device, Reports, conversation, final, say, silence, words

pytestmark = pytest.mark.asyncio(loop_scope="session")

FIRST = "I am doing well, thank you for asking."
NEXT = "How can I help you?"


class CountingTts:
    """The fake runner's synthesis, counting each text asked; `hold` keeps syntheses waiting."""

    def __init__(self, runner) -> None:
        self._synthesize = runner.synthesize  # bound before a test patches the runner with ours
        self.asked: list[str] = []
        self.hold = asyncio.Event()
        self.hold.set()

    async def synthesize(self, text: str, **kw):
        self.asked.append(text)
        await self.hold.wait()
        return await self._synthesize(text, **kw)


async def sentences(*texts: str) -> AsyncIterator[Sentence]:
    for text in texts:
        yield Sentence(text)


def speaker(tts: CountingTts, sent: list[Message]) -> Speaker:
    async def send(message: Message) -> None:
        sent.append(message)

    return Speaker(tts, send, AudioFormat(sample_rate=16000), 60, 60_000)  # type: ignore[arg-type]


def heard(sent: list[Message]) -> str:
    return FakeAsr().transcribe(s16le_to_float(b"".join(m.data for m in sent if isinstance(m, AudioChunk))))


async def test_a_prepared_first_piece_is_synthesized_once_and_its_reply_plays_all_of_it(fake_runner) -> None:
    tts, sent = CountingTts(fake_runner), []
    spk = speaker(tts, sent)
    first_piece = synthesis_pieces(FIRST)[0]
    assert first_piece == "I am doing well,"
    spk.prepare(Sentence(FIRST))
    await asyncio.sleep(0)
    assert tts.asked == [first_piece] and not sent  # synthesized ahead, nothing sent
    play = Playback()
    await spk.speak(sentences(FIRST, NEXT), play)
    assert tts.asked == [first_piece, "thank you for asking.", NEXT]  # the first piece was not asked again
    assert play.first_prepared and play.first_tts_ms is not None
    assert heard(sent).replace(" ", "") == (FIRST + NEXT).replace(" ", "")
    assert [m.text for m in sent if isinstance(m, ReplyText)] == [FIRST, NEXT]


async def test_a_preparation_of_another_text_is_cancelled_and_the_reply_synthesizes_its_own(fake_runner) -> None:
    tts, sent = CountingTts(fake_runner), []
    spk = speaker(tts, sent)
    tts.hold.clear()  # the stale preparation is still running when the reply begins
    spk.prepare(Sentence("Once upon a time."))
    await asyncio.sleep(0)
    stale = spk._prepared[1] if spk._prepared else None
    tts.hold.set()
    play = Playback()
    await spk.speak(sentences(NEXT), play)
    assert stale is not None and stale.cancelled()
    assert tts.asked == ["Once upon a time.", NEXT] and not play.first_prepared
    assert heard(sent).replace(" ", "") == NEXT.replace(" ", "")


async def test_a_dropped_preparation_is_cancelled_and_a_later_reply_is_synthesized_afresh(fake_runner) -> None:
    tts, sent = CountingTts(fake_runner), []
    spk = speaker(tts, sent)
    tts.hold.clear()
    spk.prepare(Sentence(NEXT))
    await asyncio.sleep(0)
    task = spk._prepared[1] if spk._prepared else None
    spk.drop_prepared()
    await asyncio.sleep(0)
    assert task is not None and task.cancelled()
    tts.hold.set()
    play = Playback()
    await spk.speak(sentences(NEXT), play)
    assert tts.asked == [NEXT, NEXT] and not play.first_prepared


def answers(utterance: str) -> list[str]:
    return [f"You said {utterance}", "Anything else?"]


async def test_a_speculating_brain_s_first_piece_is_synthesized_before_the_endpoint(
        fake_runner, fake_speak, monkeypatch) -> None:
    tts = CountingTts(fake_runner)
    monkeypatch.setattr(fake_runner, "synthesize", tts.synthesize)
    brain, dev, metrics = ScriptedBrain(answers, speculates=True), Device(), Reports()
    conv = conversation(fake_runner, brain, dev, metrics, speculate=True)
    await say(conv, np.concatenate([words(fake_speak, "What time is it?"), silence(300)]))  # > 120, < 500 ms
    await asyncio.wait_for(brain.asked.wait(), 10)
    for _ in range(50):  # the preparation starts once the brain's first sentence is there
        if tts.asked:
            break
        await asyncio.sleep(0.01)
    assert tts.asked == ["You said What time is it?"] and not dev.of(AudioChunk)  # before the endpoint
    await say(conv, silence(400))
    await dev.until(final)
    assert tts.asked == ["You said What time is it?", "Anything else?"]  # not synthesized twice
    assert [(m.speculative_reply, m.first_tts_prepared) for m in await metrics.wait(1)] == [(True, True)]
    await conv.close()


async def test_a_resumed_utterance_drops_the_prepared_audio_and_the_reply_says_the_whole_question(
        fake_runner, fake_speak, monkeypatch) -> None:
    tts = CountingTts(fake_runner)
    monkeypatch.setattr(fake_runner, "synthesize", tts.synthesize)
    brain, dev, metrics = ScriptedBrain(answers, speculates=True), Device(), Reports()
    conv = conversation(fake_runner, brain, dev, metrics, speculate=True)
    await say(conv, np.concatenate([words(fake_speak, "What is the"), silence(300)]))
    await asyncio.wait_for(brain.asked.wait(), 10)
    await say(conv, np.concatenate([words(fake_speak, "capital", lead_in=False), silence(700)]))
    await dev.until(final)
    assert brain.withdrawn == 1
    assert [m.text for m in dev.of(ReplyText)][-1] == "You said What is the capital Anything else?"
    assert FakeAsr().transcribe(s16le_to_float(b"".join(m.data for m in dev.of(AudioChunk)))).replace(" ", "") == \
        "You said What is the capital Anything else?".replace(" ", "")  # the withdrawn audio is never heard
    await conv.close()


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


async def test_a_reply_s_first_audio_is_due_now_and_later_audio_when_the_audio_ahead_runs_out(fake_runner) -> None:
    """The deadlines the TTS workers are handed out by (earliest first, gateway/engines/admission.py):
    another box's first piece (due now) goes before this reply's later pieces while they have time."""
    clock = Clock(100.0)
    spk = Speaker(fake_runner, None, AudioFormat(sample_rate=16000), 60, 300, clock=clock)  # type: ignore[arg-type]
    play = Playback()
    assert spk._due(play, 0.0) is None  # the first piece: now
    assert spk._due(play, 3.0) == pytest.approx(102.5)  # nothing played yet: 3 s queued, less the 0.5 s margin
    play.first_audio_at = 100.0
    clock.now = 101.0
    assert spk._due(play, 3.0) == pytest.approx(102.5)  # 1 s of it played: due when the other 2 s run out
    clock.now = 104.0
    assert spk._due(play, 3.0) == pytest.approx(104.0)  # behind already: due now, like a first piece
