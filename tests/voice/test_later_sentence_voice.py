"""A reply's long later sentence with the real piper voice: synthesized in several short calls
(gateway/voice/pieces.py `later_pieces`), it plays as one stream without a long silence at the
cuts, its visemes over its audio; and on a TTS of one worker, another box's first piece is
synthesized between its pieces instead of after the whole sentence."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest

from firmware_protocol import AudioChunk, AudioFormat, AudioStart, AudioStop, Capability, Message, ReplyText, Visemes
from gateway.audio.pcm import s16le_to_float
from gateway.brain.contract import Sentence
from gateway.engines.base import SynthChunk, TtsEngine
from gateway.engines.fake import FakeAsr, FakeVad
from gateway.engines.runner import EngineRunner
from gateway.expression.device import DeviceExpression
from gateway.expression.sentence import Expression
from gateway.voice.pieces import MAX_WORDS, later_pieces, synthesis_pieces
from gateway.voice.speaker import Playback, Speaker
from tests.voice.hearing import heard_per_piece
from tests.voice.test_long_first_sentence_voice import longest_silence_ms

pytestmark = pytest.mark.asyncio(loop_scope="session")
CONFIG = Path(__file__).resolve().parents[2] / "config"
RATE = 16000
FIRST = "Here is your garden."
LATER = ("The roses by the kitchen window are in full bloom this week, the little apple tree near the gate "
         "has its first green leaves, and the tomatoes you planted in May are almost ready to pick.")
OTHER = "It is a quarter past nine in the evening."  # another box's reply


async def reply(*texts: str) -> AsyncIterator[Sentence]:
    for text in texts:
        yield Sentence(text)


class Recorded:
    """The runner, noting the text of each synthesis call."""

    def __init__(self, runner: EngineRunner) -> None:
        self._runner = runner
        self.texts: list[str] = []

    async def synthesize(self, text: str, **kw) -> list[SynthChunk]:
        self.texts.append(text)
        return await self._runner.synthesize(text, **kw)


async def test_a_long_later_sentence_is_synthesized_in_several_calls_and_plays_as_one_stream(runner, transcribe) -> None:
    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    hook = DeviceExpression(Expression.from_paths(CONFIG / "action_rules.csv", CONFIG / "sentiment.yaml"),
                            Capability.VISEMES)
    recorded = Recorded(runner)
    play = Playback()
    await Speaker(recorded, send, AudioFormat(sample_rate=RATE), 60, 60_000,  # type: ignore[arg-type]
                  on_sentence=hook).speak(reply(FIRST, LATER), play)

    later = [t for t in recorded.texts if t in LATER]
    assert len(later) >= 3 and " ".join(later) == LATER  # several calls, the whole sentence
    assert all(len(t.split()) <= MAX_WORDS for t in later)
    mine = [m for m in sent if getattr(m, "stream_id", None) == 2]
    kinds = [type(m) for m in mine]
    assert kinds[0] is ReplyText and kinds[-1] is AudioStop and kinds.count(AudioStart) == 1  # one stream
    chunks = [m for m in mine if isinstance(m, AudioChunk)]
    assert [c.seq for c in chunks] == list(range(len(chunks)))
    pcm = s16le_to_float(b"".join(c.data for c in chunks))
    # every piece is heard, in order: most of its words (piper renders with noise, and the ASR
    # mishears a word of one rendering now and then; a lost piece is not heard at all)
    heard = heard_per_piece(later, transcribe(pcm, RATE))
    assert min(heard) >= 0.5, (later, heard)
    # the cuts keep a short pause (CLAUSE_PAUSE_MS 120 ms at a comma, WORD_PAUSE_MS 30 between
    # words): no silence longer than the whole sentence's own pauses between its words (< 200 ms);
    # piper leaves ~300 ms after each piece as it is
    assert longest_silence_ms(pcm) < 200
    runs = [r for m in mine if isinstance(m, Visemes) for r in m.visemes]
    starts = [r[1] for r in runs]
    assert starts == sorted(starts) and starts[0] < 100  # each piece's visemes after the ones before
    audio_ms = len(pcm) * 1000 / RATE
    assert runs[-1][1] + runs[-1][2] == pytest.approx(audio_ms, abs=60)  # the track ends with the audio
    assert all(start + length <= audio_ms + 60 for _, start, length, _ in runs)  # ... and stays on it
    assert sum(r[2] for r in runs) >= 0.9 * audio_ms  # no stretch of the audio without a viseme
    assert play.said() == f"{FIRST} {LATER}"


class HeldTts:
    """The real voice, noting the order its calls run in (on the worker thread) and holding the
    first call of `LATER` until `release` is set, so the test knows which calls wait behind it."""

    def __init__(self, tts: TtsEngine, hold: Callable[[str], bool]) -> None:
        self._tts = tts
        self._hold = hold
        self.sample_rate = tts.sample_rate
        self.ran: list[str] = []
        self.holding = threading.Event()
        self.release = threading.Event()

    def synthesize(self, text: str) -> Iterator[SynthChunk]:
        self.ran.append(text)
        if not self.holding.is_set() and self._hold(text):
            self.holding.set()
            self.release.wait(30)
        return self._tts.synthesize(text)


async def until(condition: Callable[[], bool], what: str) -> None:
    for _ in range(3000):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"timed out waiting until {what}")


async def test_another_boxs_first_piece_is_synthesized_between_the_pieces_of_a_long_later_sentence(runner) -> None:
    tts = HeldTts(runner.tts, hold=lambda text: text != FIRST and text in LATER)
    shared = EngineRunner(FakeVad(), FakeAsr(), tts, tts_workers=1)  # the real voice, one worker
    boxes: dict[str, list[Message]] = {"a": [], "b": []}

    def speaker(name: str) -> Speaker:
        async def send(message: Message) -> None:
            boxes[name].append(message)

        return Speaker(shared, send, AudioFormat(sample_rate=RATE), 60, 60_000, who=name)

    try:
        a = asyncio.create_task(speaker("a").speak(reply(FIRST, LATER), Playback()))
        await until(tts.holding.is_set, "box a's later sentence is being synthesized")
        b = asyncio.create_task(speaker("b").speak(reply(OTHER), Playback()))
        await until(lambda: shared.tts_admission.queued == 1, "box b waits for the worker")
        tts.release.set()
        await asyncio.wait_for(asyncio.gather(a, b), 300)  # a bound for a hang, not a speed
    finally:
        tts.release.set()
        shared.close()

    pieces = later_pieces(LATER)
    b_first = synthesis_pieces(OTHER)[0]
    assert len(pieces) >= 3
    # box b's first piece ran right after the piece of box a that was running when it asked, not
    # after the whole of box a's sentence
    assert tts.ran[:3] == [FIRST, pieces[0], b_first]
    assert [t for t in tts.ran if t in LATER and t != FIRST] == pieces
    assert tts.ran.index(b_first) < tts.ran.index(pieces[1])
    for messages in boxes.values():  # both replies complete, one stream per sentence
        kinds = [type(m) for m in messages]
        assert kinds.count(AudioStart) == kinds.count(AudioStop) >= 1
