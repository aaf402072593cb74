"""End to end over a real loopback WebSocket with the real models: speak, hear, answer, speak back.
The malformed-frame tests need no models: they run on the fake engines."""

from __future__ import annotations

import asyncio
import logging

import numpy as np
import pytest
from websockets.asyncio.client import connect

from firmware_protocol import AudioFormat, Error, Hello, ReplyText, TextInput, Welcome, decode, encode
from gateway.audio.pcm import rms_dbfs, s16le_to_float
from gateway.cli.virtual_box import simulate
from tests.conftest import words

pytestmark = pytest.mark.asyncio(loop_scope="session")


@pytest.mark.models
async def test_a_spoken_question_is_transcribed_and_answered_with_speech(ws_gateway, speak, transcribe):
    audio, rate = speak("How are you?")
    result = await simulate(ws_gateway, audio, rate, device_id="box-e2e", out_rate=16000, speed=2.0, timeout=30)

    assert words(result.transcript) == ["how", "are", "you"]
    assert result.reply_text.startswith("I am doing well")
    reply = s16le_to_float(result.reply_audio)
    assert result.audio_seconds > 1.0
    assert rms_dbfs(reply) > -35  # real speech, not silence
    # The reply audio says the reply text: the ASR hears it back.
    heard = words(transcribe(reply, result.out_rate))
    expected = words(result.reply_text)
    overlap = len(set(heard) & set(expected)) / len(set(expected))
    assert overlap >= 0.8, (heard, expected)


@pytest.mark.models
async def test_reply_audio_comes_in_the_sample_rate_the_device_asked_for(ws_gateway, speak, transcribe):
    audio, rate = speak("What is your name?")
    result = await simulate(ws_gateway, audio, rate, device_id="box-24k", out_rate=24000, speed=2.0, timeout=30)
    assert result.out_rate == 24000
    assert "voice assistant" in result.reply_text
    assert "assistant" in words(transcribe(s16le_to_float(result.reply_audio), 24000))


@pytest.mark.models
async def test_push_to_talk_ends_the_utterance_when_the_device_stops_the_stream(ws_gateway, speak):
    audio, rate = speak("What time is it?")
    result = await simulate(ws_gateway, audio, rate, device_id="box-ptt", push_to_talk=True, speed=0, timeout=30)
    assert words(result.transcript) == ["what", "time", "is", "it"]
    assert result.reply_text.startswith("It is")


async def test_malformed_frames_get_an_error_and_a_log_line_while_other_devices_are_served(fake_ws_gateway, caplog):
    caplog.set_level(logging.WARNING)

    async def bad_client() -> list[Error]:
        errors = []
        async with connect(fake_ws_gateway) as ws:
            await ws.send(encode(Hello(device_id="bad-box")))
            assert isinstance(decode(await ws.recv()), Welcome)
            for garbage in (b"\xff\x00\x01", b"", b"\x01\x00\x05ab", "text frame"):
                await ws.send(garbage)
                errors.append(decode(await asyncio.wait_for(ws.recv(), 5)))
        return errors

    async def good_client() -> str:
        async with connect(fake_ws_gateway) as ws:
            await ws.send(encode(Hello(device_id="good-box", audio_out=AudioFormat(sample_rate=16000))))
            assert isinstance(decode(await ws.recv()), Welcome)
            await ws.send(encode(TextInput(text="thank you")))
            async for frame in ws:
                msg = decode(frame)
                if isinstance(msg, ReplyText) and msg.final:
                    return msg.text
        return ""

    errors, reply = await asyncio.wait_for(asyncio.gather(bad_client(), good_client()), 30)
    assert all(isinstance(e, Error) for e in errors)
    assert [e.code for e in errors] == ["unknown-message-type", "malformed-message", "malformed-message", "malformed-message"]
    assert reply  # the well-behaved device got its answer meanwhile
    logged = [r.getMessage() for r in caplog.records if "bad-box" in r.getMessage()]
    assert any("unknown-message-type" in line for line in logged), logged
    assert any(line.startswith("ws 127.0.0.1:") for line in logged), logged


async def test_simulate_reports_a_clear_error_when_no_gateway_listens():
    from gateway.cli.virtual_box import SimulateError

    with pytest.raises(SimulateError, match="cannot connect"):
        await simulate("ws://127.0.0.1:9/ws", np.zeros(1600, np.float32), 16000, timeout=5)


async def test_an_oversized_frame_gets_frame_too_large_and_the_connection_stays_usable(fake_ws_gateway, fake_cfg):
    from firmware_protocol import AudioChunk, Ping, Pong

    async with connect(fake_ws_gateway, max_size=None) as ws:
        await ws.send(encode(Hello(device_id="big-box")))
        assert isinstance(decode(await ws.recv()), Welcome)
        big = AudioChunk(stream_id=1, seq=0, data=b"\x00" * (fake_cfg.server.max_frame_bytes + 2))
        await ws.send(encode(big))
        err = decode(await asyncio.wait_for(ws.recv(), 5))
        assert isinstance(err, Error) and err.code == "frame-too-large"
        await ws.send(encode(Ping(nonce=7)))
        assert decode(await asyncio.wait_for(ws.recv(), 5)) == Pong(nonce=7)
