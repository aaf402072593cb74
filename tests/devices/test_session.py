"""Device sessions through the in-memory link (real codec, fake engines, no sockets)."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from firmware_protocol import (
    Abort,
    AudioChunk,
    AudioFormat,
    AudioStart,
    AudioStop,
    Error,
    Hello,
    Ping,
    Pong,
    ReplyText,
    StopReason,
    TextInput,
    Transcript,
    Welcome,
)
from gateway.audio.pcm import float_to_s16le, resample
from tests.conftest import words

pytestmark = pytest.mark.asyncio(loop_scope="session")

LONG_QUESTION = "help"  # its answer is a few seconds of speech


async def recv(dev, timeout: float = 10):
    return await asyncio.wait_for(dev.receive(), timeout)


async def hello(link, device_id: str, **kw):
    dev = link.connect()
    await dev.send(Hello(device_id=device_id, **kw))
    welcome = await recv(dev)
    assert isinstance(welcome, Welcome)
    return dev


async def test_messages_before_hello_are_refused_with_hello_required(memory_link):
    dev = memory_link.connect()
    await dev.send(TextInput(text="hi"))
    err = await recv(dev)
    assert isinstance(err, Error) and err.code == "hello-required"
    await dev.send(Hello(device_id="late-hello"))
    assert isinstance(await recv(dev), Welcome)


async def test_a_silent_device_gets_hello_timeout(memory_link):
    dev = memory_link.connect()
    err = await recv(dev, timeout=10)  # the test config allows 2 s
    assert isinstance(err, Error) and err.code == "hello-timeout"


async def test_ping_is_answered_with_pong_carrying_the_same_nonce(memory_link):
    dev = await hello(memory_link, "pinger")
    await dev.send(Ping(nonce=0xDEADBEEF))
    assert await recv(dev) == Pong(nonce=0xDEADBEEF)


async def test_welcome_offers_pcm_at_the_rate_the_device_asked_for(memory_link):
    dev = memory_link.connect()
    await dev.send(Hello(device_id="rate-box", audio_out=AudioFormat(sample_rate=22050)))
    welcome = await recv(dev)
    assert welcome.audio_out == AudioFormat(codec="pcm_s16le", sample_rate=22050, channels=1)


async def test_an_opus_microphone_at_a_rate_opus_lacks_is_refused_but_text_still_works(memory_link):
    dev = memory_link.connect()  # (Opus at its own rates: tests/devices/test_session_opus.py)
    await dev.send(Hello(device_id="opus-box", audio_in=AudioFormat(codec="opus", sample_rate=44100)))
    err = await recv(dev)
    assert isinstance(err, Error) and err.code == "unsupported-audio-format" and "opus is mono at one of" in err.text
    assert isinstance(await recv(dev), Welcome)
    await dev.send(TextInput(text="thanks"))
    while not (isinstance(msg := await recv(dev), ReplyText) and msg.final):
        pass
    assert msg.text


async def test_abort_stops_the_reply_within_one_chunk(memory_link):
    dev = await hello(memory_link, "abort-box")
    await dev.send(TextInput(text=LONG_QUESTION))
    # The first 300 ms (prebuffer) come in a burst; once chunks arrive paced, nothing is queued.
    chunks = 0
    while chunks < 8:
        chunks += isinstance(await recv(dev), AudioChunk)
    await dev.send(Abort(reason="button"))
    after_abort = []
    while not (isinstance(msg := await recv(dev), AudioStop) and msg.reason == StopReason.ABORTED):
        after_abort.append(msg)
    assert sum(isinstance(m, AudioChunk) for m in after_abort) <= 1
    final = await recv(dev)
    assert isinstance(final, ReplyText) and final.final
    # nothing else is sent for that reply
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(dev.receive(), 0.5)


async def test_speaking_over_the_reply_interrupts_it_and_the_new_question_is_answered(memory_link, fake_speak):
    dev = await hello(memory_link, "barge-box", audio_in=AudioFormat(sample_rate=16000))
    await dev.send(TextInput(text=LONG_QUESTION))
    while not isinstance(await recv(dev), AudioChunk):
        pass
    audio, rate = fake_speak("What time is it?")
    mic = np.concatenate([resample(audio, rate, 16000), np.zeros(16000, np.float32)])
    seen: list = []
    answered = asyncio.Event()

    async def collect() -> None:
        while True:
            msg = await dev.receive()
            seen.append(msg)
            if isinstance(msg, ReplyText) and msg.final and msg.text.startswith("It is"):
                answered.set()

    collector = asyncio.create_task(collect())
    await dev.send(AudioStart(stream_id=1))
    for seq, i in enumerate(range(0, len(mic), 320)):  # 20 ms chunks, as fast as the link takes them
        await dev.send(AudioChunk(stream_id=1, seq=seq, data=float_to_s16le(mic[i : i + 320])))
    await asyncio.wait_for(answered.wait(), 30)
    collector.cancel()
    assert any(isinstance(m, AudioStop) and m.reason == StopReason.ABORTED for m in seen)
    transcripts = [words(m.text) for m in seen if isinstance(m, Transcript)]
    assert transcripts == [["what", "time", "is", "it"]]
