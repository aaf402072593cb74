"""The Speaker on the fake engines: sentences -> one audio stream each, in order, at the device's rate,
with the expression hook's packets before the audio; cancelling stops within one chunk."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from firmware_protocol import AudioChunk, AudioFormat, AudioStart, AudioStop, Message, Ping, ReplyText, StopReason
from gateway.audio.pcm import resample, s16le_to_float
from gateway.brain.contract import Sentence
from gateway.engines.base import SpeechPiece
from gateway.engines.fake import FakeAsr
from gateway.voice.speaker import Playback, Speaker

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def sentences(*texts: str) -> AsyncIterator[Sentence]:
    for text in texts:
        yield Sentence(text)


def speaker(runner, sent: list[Message], rate: int = 16000, prebuffer_ms: int = 60_000, hook=None) -> Speaker:
    async def send(message: Message) -> None:
        sent.append(message)

    return Speaker(runner, send, AudioFormat(sample_rate=rate), 60, prebuffer_ms, on_sentence=hook)


@pytest.mark.parametrize("rate", [8000, 16000, 24000])
async def test_each_sentence_is_its_own_stream_in_order_and_its_audio_says_it(fake_runner, rate) -> None:
    sent: list[Message] = []
    hooked: list[tuple[Sentence, int]] = []

    def hook(sentence, chunks, sid, piece) -> list[Message]:
        assert sum(c.pcm.size for c in chunks) > 0 and piece == SpeechPiece.whole(chunks)
        hooked.append((sentence, sid))
        return [Ping(nonce=sid)]  # stands for the expression packets

    play = Playback()
    await speaker(fake_runner, sent, rate, hook=hook).speak(sentences("Hello there.", "", "How are you?"), play)

    streams = [m.stream_id for m in sent if isinstance(m, AudioStart)]
    assert streams == [1, 2] and hooked == [(Sentence("Hello there."), 1), (Sentence("How are you?"), 2)]
    for sid, text in zip(streams, ["Hello there.", "How are you?"]):
        mine = [m for m in sent if getattr(m, "stream_id", None) == sid or m == Ping(nonce=sid)]
        kinds = [type(m) for m in mine]
        assert kinds[:3] == [ReplyText, Ping, AudioStart] and kinds[-1] is AudioStop
        assert set(kinds[3:-1]) == {AudioChunk} and mine[-1].reason == StopReason.END
        assert mine[0].text == text and not mine[0].final
        assert [m.seq for m in mine if isinstance(m, AudioChunk)] == list(range(len(mine) - 4))
        pcm = b"".join(m.data for m in mine if isinstance(m, AudioChunk))
        assert len(pcm) / 2 / rate == pytest.approx(len(text) * 0.040, abs=0.002)  # 40 ms per character
        assert FakeAsr().transcribe(resample(s16le_to_float(pcm), rate, 16000)) == text
    assert play.audio_seconds == pytest.approx((12 + 12) * 0.040, abs=0.01)
    assert play.open_stream is None and play.first_audio_at is not None and play.first_tts_ms is not None
    assert play.shown() == "Hello there. How are you?"


async def test_cancelling_the_speaking_task_stops_within_one_chunk_and_leaves_the_stream_open(fake_runner) -> None:
    sent: list[Message] = []
    play = Playback()
    chunks = asyncio.Event()

    async def send(message: Message) -> None:
        sent.append(message)
        if sum(isinstance(m, AudioChunk) for m in sent) >= 8:
            chunks.set()

    spk = Speaker(fake_runner, send, AudioFormat(sample_rate=16000), 60, 300)  # paced after 300 ms
    task = asyncio.create_task(spk.speak(sentences("A long sentence that keeps on going for a while. " * 3), play))
    await asyncio.wait_for(chunks.wait(), 10)
    at_cancel = len(sent)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert sum(isinstance(m, AudioChunk) for m in sent[at_cancel:]) <= 1
    assert not any(isinstance(m, AudioStop) for m in sent)  # the caller sends AudioStop(ABORTED)
    assert play.open_stream == 1 and play.audio_seconds < 5
