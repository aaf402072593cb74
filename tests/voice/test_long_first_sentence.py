"""A reply's long first sentence on the fake engines: its first audio goes out before the rest of the
sentence is synthesized, in one audio stream, with the expression packets still aligned to it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from firmware_protocol import Action, AudioChunk, AudioFormat, AudioStart, AudioStop, Capability, Message, ReplyText, Sentiment, Visemes
from gateway.audio.pcm import s16le_to_float
from gateway.brain.contract import Sentence
from gateway.engines.fake import FakeAsr
from gateway.expression.device import DeviceExpression
from gateway.expression.sentence import Expression
from gateway.voice.pieces import FIRST_WORDS, spoken_words, synthesis_pieces
from gateway.voice.speaker import Playback, Speaker

CONFIG = Path(__file__).resolve().parents[2] / "config"
LONG = ("Your blood pressure this morning was 128 over 82, measured at a quarter to eight in the bedroom, "
        "a little lower than last night and well inside the range your doctor asked for, so all is really fine for today.")


class HeldTts:
    """The fake engines' runner, whose syntheses after the first wait until `release` is set."""

    def __init__(self, runner) -> None:
        self._runner = runner
        self.release = asyncio.Event()
        self.asked: list[str] = []
        self.done: list[str] = []

    async def synthesize(self, text: str, **kw):
        self.asked.append(text)
        if len(self.asked) > 1:
            await self.release.wait()
        chunks = await self._runner.synthesize(text, **kw)
        self.done.append(text)
        return chunks


async def one(text: str) -> AsyncIterator[Sentence]:
    yield Sentence(text)


def test_a_long_sentence_is_cut_at_its_clauses_and_a_short_one_is_not() -> None:
    assert len(LONG.split()) == 40
    pieces = synthesis_pieces(LONG)
    assert len(pieces) > 2 and " ".join(pieces) == LONG
    assert all(3 <= len(p.split()) <= 12 for p in pieces) and len(pieces[0].split()) <= FIRST_WORDS
    assert pieces[:2] == ["Your blood pressure this morning", "was 128 over 82,"]  # a long first clause halved
    assert pieces[2] == "measured at a quarter to eight in the bedroom,"  # cut at its clauses
    assert synthesis_pieces(" ".join(["word"] * 20)) == [" ".join(["word"] * 5)] * 4
    assert synthesis_pieces("It is 3:05 PM.") == ["It is 3:05 PM."]
    assert synthesis_pieces("I am doing well, thank you for asking.") == ["I am doing well,", "thank you for asking."]
    assert synthesis_pieces("Sorry, I did not catch that.") == ["Sorry, I did not catch that."]  # 6 words
    # numbers count as the words they are said in: "7:45 AM today:" is long to say, so the memory
    # answer's first clause is cut too (the cut at its colon stays)
    assert spoken_words("Measured at 7:45 AM today:") == 7 and spoken_words("It is 3:05 PM.") == 6
    assert synthesis_pieces("Measured at 7:45 AM today: blood pressure 128 over 82 mmHg, pulse 64 bpm.") == [
        "Measured at 7:45", "AM today:", "blood pressure 128 over 82 mmHg,", "pulse 64 bpm."]


@pytest.mark.asyncio(loop_scope="session")
async def test_the_first_audio_of_a_40_word_first_sentence_goes_out_before_its_synthesis_is_done(fake_runner) -> None:
    sent: list[Message] = []
    runner = HeldTts(fake_runner)
    first_audio = asyncio.Event()

    async def send(message: Message) -> None:
        sent.append(message)
        if isinstance(message, AudioChunk):
            first_audio.set()

    hook = DeviceExpression(Expression.from_paths(CONFIG / "action_rules.csv", CONFIG / "sentiment.yaml"),
                            Capability.VISEMES | Capability.ACTION)
    spk = Speaker(runner, send, AudioFormat(sample_rate=16000), 60, 60_000, on_sentence=hook)  # type: ignore[arg-type]
    play = Playback()
    task = asyncio.create_task(spk.speak(one(LONG), play))
    await asyncio.wait_for(first_audio.wait(), 10)
    assert len(runner.done) == 1 and len(runner.asked) == 2  # the rest of the sentence is not synthesized yet
    kinds = [type(m) for m in sent]
    assert kinds[:5] == [ReplyText, Action, Sentiment, Visemes, AudioStart] or \
        kinds[:4] == [ReplyText, Sentiment, Visemes, AudioStart]  # action, sentiment before the first audio
    runner.release.set()
    await asyncio.wait_for(task, 10)

    assert [type(m) for m in sent].count(AudioStart) == 1 and isinstance(sent[-1], AudioStop)  # one stream
    assert {m.stream_id for m in sent if hasattr(m, "stream_id")} == {1}
    chunks = [m for m in sent if isinstance(m, AudioChunk)]
    assert [c.seq for c in chunks] == list(range(len(chunks)))
    assert all(len(c.data) == len(chunks[0].data) for c in chunks[:-1])  # no short chunk at the joins
    pcm = b"".join(c.data for c in chunks)
    heard = FakeAsr().transcribe(s16le_to_float(pcm))
    assert heard.replace(" ", "") == LONG.replace(" ", "")  # every piece, in order, nothing lost
    runs = [r for m in sent if isinstance(m, Visemes) for r in m.visemes]
    starts = [r[1] for r in runs]
    assert starts == sorted(starts)  # the later pieces' visemes are appended after the first's
    audio_ms = len(pcm) / 2 / 16
    assert runs[-1][1] + runs[-1][2] == pytest.approx(audio_ms, abs=25)  # the track covers the whole audio
    later = [i for i, m in enumerate(sent) if isinstance(m, Visemes)][1:]
    assert later and all(any(isinstance(m, AudioChunk) for m in sent[i:]) for i in later)  # each before its audio
    assert play.said() == LONG
