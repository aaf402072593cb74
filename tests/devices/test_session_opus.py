"""Opus on the gateway's own protocol (gateway/devices/audio_codec.py): a Hello asking codec opus
both ways is served through the same pipeline: the device's Opus packets (one per AudioChunk) are
decoded for the VAD/ASR, the reply is encoded in 20 ms Opus packets announced by AudioStart; an
undecodable packet is a bad-audio error and the session goes on (in-memory link, fake engines)."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from firmware_protocol import (AudioChunk, AudioFormat, AudioStart, AudioStop, Error, Hello, ReplyText, TextInput,
                               Transcript, Welcome)
from gateway.audio.opus import OpusDecoder, OpusEncoder
from gateway.audio.pcm import float_to_s16le, resample, s16le_to_float
from gateway.devices.audio_codec import OPUS_FRAME_MS
from tests.conftest import words

pytestmark = pytest.mark.asyncio(loop_scope="session")
OPUS16 = AudioFormat(codec="opus", sample_rate=16000, channels=1)


async def recv(dev, timeout: float = 10):
    return await asyncio.wait_for(dev.receive(), timeout)


async def opus_hello(link, device_id: str, audio_out: AudioFormat) -> tuple[object, Welcome]:
    dev = link.connect()
    await dev.send(Hello(device_id=device_id, audio_in=OPUS16, audio_out=audio_out))
    welcome = await recv(dev)
    assert isinstance(welcome, Welcome)
    return dev, welcome


async def test_an_opus_box_is_heard_and_answered_in_opus(memory_link, fake_speak, fake_transcribe):
    dev, welcome = await opus_hello(memory_link, "opus-both", AudioFormat(codec="opus", sample_rate=24000))
    assert welcome.audio_out == AudioFormat(codec="opus", sample_rate=24000, channels=1)
    audio, rate = fake_speak("What time is it?")
    mic = np.concatenate([resample(audio, rate, 16000), np.zeros(16000, np.float32)])
    encoder = OpusEncoder(16000, 60)  # the device's own frame duration: a packet says its length
    packets = encoder.encode(float_to_s16le(mic)) + encoder.flush()
    await dev.send(AudioStart(stream_id=1, format=OPUS16))
    for seq, packet in enumerate(packets):
        await dev.send(AudioChunk(stream_id=1, seq=seq, data=packet))
    decoder, pcm, starts, text = OpusDecoder(24000), bytearray(), [], ""
    while True:
        msg = await recv(dev, 30)
        if isinstance(msg, Transcript):
            assert words(msg.text) == ["what", "time", "is", "it"]
        elif isinstance(msg, AudioStart):
            starts.append(msg.format)
        elif isinstance(msg, AudioChunk):
            frame = decoder.decode(msg.data)  # exactly one Opus packet of 20 ms per chunk
            assert len(frame) == 2 * 24000 * OPUS_FRAME_MS // 1000
            pcm += frame
        elif isinstance(msg, ReplyText) and not msg.final:
            text += (" " if text else "") + msg.text
        elif isinstance(msg, ReplyText):
            break
    assert starts and all(f == welcome.audio_out for f in starts)
    assert text.startswith("It is ") and fake_transcribe(s16le_to_float(bytes(pcm)), 24000) == text


async def test_an_opus_reply_rate_opus_lacks_gets_the_nearest_it_has(memory_link):
    _, welcome = await opus_hello(memory_link, "opus-22k", AudioFormat(codec="opus", sample_rate=22050))
    assert welcome.audio_out == AudioFormat(codec="opus", sample_rate=24000, channels=1)


async def test_opus_in_pcm_out_and_an_undecodable_packet_is_refused_and_the_session_goes_on(memory_link):
    dev, welcome = await opus_hello(memory_link, "opus-in", AudioFormat(sample_rate=16000))
    assert welcome.audio_out == AudioFormat(codec="pcm_s16le", sample_rate=16000, channels=1)
    await dev.send(AudioChunk(stream_id=1, seq=0, data=b"\xff\xff\xff"))
    err = await recv(dev)
    assert isinstance(err, Error) and err.code == "bad-audio" and "stream 1 seq 0" in err.text
    await dev.send(AudioStop(stream_id=1))
    await dev.send(TextInput(text="thanks"))
    while not isinstance(msg := await recv(dev), AudioChunk):
        pass
    assert len(msg.data) % 2 == 0  # PCM, as Welcome said
