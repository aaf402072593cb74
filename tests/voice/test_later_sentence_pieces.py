"""A reply's later sentences are synthesized in bounded pieces too (gateway/voice/pieces.py
`later_pieces`), on the fake engines: cut at their clauses, each piece asked for by its own
deadline, still one audio stream per sentence that says all of it."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from firmware_protocol import AudioChunk, AudioFormat, AudioStart, AudioStop, Message, ReplyText
from gateway.audio.pcm import s16le_to_float
from gateway.brain.contract import Sentence
from gateway.engines.fake import FakeAsr
from gateway.voice.pieces import MAX_WORDS, later_pieces, spoken_words
from gateway.voice.speaker import Playback, Speaker

FIRST = "Here is your garden."
LATER = ("The roses by the kitchen window are in full bloom this week, the little apple tree near the gate "
         "has its first green leaves, and the tomatoes you planted in May are almost ready to pick.")


def test_a_long_later_sentence_is_cut_at_its_clauses_into_pieces_of_at_most_the_bound() -> None:
    assert len(LATER.split()) == 36
    pieces = later_pieces(LATER)
    assert " ".join(pieces) == LATER and len(pieces) >= 3
    assert all(3 <= len(p.split()) <= MAX_WORDS for p in pieces)
    ends = {p.split()[-1] for p in pieces}
    assert {"week,", "leaves,", "pick."} <= ends  # every clause boundary is a cut
    assert later_pieces(LATER, max_words=12) == [
        "The roses by the kitchen window are in full bloom this week,",
        "the little apple tree near the gate has its first green leaves,",
        "and the tomatoes you planted in May are almost ready to pick."]  # clauses that fit stay whole


def test_a_later_sentence_within_the_bound_is_one_piece_and_a_longer_clause_is_cut_evenly() -> None:
    assert later_pieces("How can I help you?") == ["How can I help you?"]
    short = "I run right here on your local gateway."  # 8 words: no cut, unlike a first sentence's
    assert spoken_words(short) <= MAX_WORDS and later_pieces(short) == [short]
    assert later_pieces(" ".join(["word"] * 20), max_words=8) == [
        " ".join(["word"] * 7), " ".join(["word"] * 7), " ".join(["word"] * 6)]
    assert later_pieces("You can ask me the time, the date, or just say hello.", max_words=8) == [
        "You can ask me the time,", "the date, or just say hello."]  # "the date," alone is too short
    # the first piece is bounded like the others (not to FIRST_WORDS: no first audio waits for it)
    assert later_pieces("Your reading from 7:45 AM was 128 over 82, which is fine.", max_words=8) == [
        "Your reading from 7:45 AM", "was 128 over 82,", "which is fine."]


class Recorded:
    """The fake engines' runner, noting each synthesis call's text and deadline."""

    def __init__(self, runner) -> None:
        self._runner = runner
        self.calls: list[tuple[str, float | None]] = []

    async def synthesize(self, text: str, who: str = "", deadline: float | None = None):
        self.calls.append((text, deadline))
        return await self._runner.synthesize(text, who=who, deadline=deadline)


async def reply(*texts: str) -> AsyncIterator[Sentence]:
    for text in texts:
        yield Sentence(text)


@pytest.mark.asyncio(loop_scope="session")
async def test_a_long_later_sentence_is_synthesized_piece_by_piece_each_by_its_own_deadline(fake_runner) -> None:
    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    runner = Recorded(fake_runner)
    play = Playback()
    await Speaker(runner, send, AudioFormat(sample_rate=16000), 60, 60_000).speak(reply(FIRST, LATER), play)  # type: ignore[arg-type]

    pieces = later_pieces(LATER)
    assert [text for text, _ in runner.calls] == [FIRST, *pieces]  # the later sentence in several calls
    deadlines = [d for _, d in runner.calls[1:]]
    assert None not in deadlines and deadlines == sorted(deadlines)  # each due when the audio ahead runs out
    assert len(set(deadlines)) == len(deadlines)
    later = [m for m in sent if getattr(m, "stream_id", None) == 2]
    kinds = [type(m) for m in later]
    assert kinds[:2] == [ReplyText, AudioStart] and kinds[-1] is AudioStop and kinds.count(AudioStart) == 1
    assert set(kinds[2:-1]) == {AudioChunk}  # one stream, no stop and start again at the cuts
    chunks = [m for m in later if isinstance(m, AudioChunk)]
    assert [c.seq for c in chunks] == list(range(len(chunks)))
    assert all(len(c.data) == len(chunks[0].data) for c in chunks[:-1])  # no short chunk at the joins
    heard = FakeAsr().transcribe(s16le_to_float(b"".join(c.data for c in chunks)))
    assert heard.replace(" ", "") == LATER.replace(" ", "")  # every piece, in order
    assert play.said() == f"{FIRST} {LATER}"
