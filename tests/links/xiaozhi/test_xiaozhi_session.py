"""A xiaozhi-esp32 box (the emulator in box.py) talks to a running gateway over its own protocol:
OTA bootstrap, hello, each listen mode, abort, barge-in, v1/v2/v3 framing (fake engines: the
fake ASR reads the fake TTS's tone code, which survives Opus)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import numpy as np
import pytest
import pytest_asyncio

from gateway.audio.pcm import resample
from gateway.links.xiaozhi.emotions import EMOJI
from tests.links.xiaozhi.box import XiaozhiBox
from tests.links.xiaozhi.conftest import serve_xiaozhi, xiaozhi_cfg

OTA = "/xiaozhi/ota/"


def mic(speak, text: str) -> np.ndarray:
    audio, rate = speak(text)
    return resample(audio, rate, 16000)


async def booted_box(base: str, version: int = 1, mac: str = "a0:b1:c2:d3:e4:f5") -> XiaozhiBox:
    box = XiaozhiBox(mac=mac, version=version)
    status, reply = await box.ota(base + OTA)
    assert status == 200, reply
    box.version = version  # the OTA reply names no version: the box keeps its configured one
    return box


def sentences(box: XiaozhiBox) -> str:
    return " ".join(m["text"] for m in box.of_type("tts", state="sentence_start"))


async def test_the_ota_bootstrap_gives_time_the_boxs_own_version_and_a_reachable_websocket_with_a_token(xz_gateway):
    box = XiaozhiBox(mac="a0:b1:c2:00:00:01", firmware="1.7.6")
    status, reply = await box.ota(xz_gateway + OTA)
    assert status == 200
    assert reply["firmware"] == {"version": "1.7.6", "url": ""}  # no update offered
    assert abs(reply["server_time"]["timestamp"] / 1000 - __import__("time").time()) < 60
    assert isinstance(reply["server_time"]["timezone_offset"], int)
    assert reply["websocket"]["url"] == xz_gateway.replace("http", "ws") + "/xiaozhi/v1/"  # asked on loopback
    assert len(reply["websocket"]["token"]) >= 24 and "mqtt" not in reply


async def test_a_get_on_the_ota_url_answers_a_human_readable_status(xz_gateway):
    reader, writer = await asyncio.open_connection("127.0.0.1", int(xz_gateway.rsplit(":", 1)[1]))
    writer.write(f"GET {OTA} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    data = await asyncio.wait_for(reader.read(), 10)
    writer.close()
    assert data.startswith(b"HTTP/1.1 200") and b"xiaozhi OTA endpoint" in data


async def test_the_hello_is_answered_with_the_opus_audio_params_the_gateway_will_send(xz_gateway):
    box = await booted_box(xz_gateway)
    hello = await box.open()
    assert hello["transport"] == "websocket" and hello["session_id"]
    assert hello["audio_params"] == {"format": "opus", "sample_rate": 24000, "channels": 1, "frame_duration": 60}
    await box.close()


async def _turn(box: XiaozhiBox, fake_transcribe, question: str) -> str:
    stt = await box.wait_for(lambda m: m.get("type") == "stt", 20)
    assert stt["text"] == question
    await box.wait_for(lambda m: m.get("type") == "tts" and m.get("state") == "stop", 30)
    assert box.events.index("tts:start") < box.events.index("audio")  # the firmware drops audio before it
    assert box.packets_dropped == 0 and box.queue_peak <= 40
    reply = sentences(box)
    assert reply and fake_transcribe(box.reply_audio(), box.server_rate) == reply  # the Opus reply says it
    return reply


@pytest.mark.parametrize("version", [1, 2, 3])
async def test_auto_mode_the_gateway_hears_the_end_of_speech_and_answers_in_opus(xz_gateway, fake_speak, fake_transcribe, version):
    box = await booted_box(xz_gateway, version, mac=f"a0:b1:c2:00:01:0{version}")
    await box.open()
    await box.listen("auto")
    await box.say(mic(fake_speak, "What time is it?"), silence_s=1.5)
    assert (await _turn(box, fake_transcribe, "What time is it?")).startswith("It is ")
    await box.close()


async def test_manual_mode_listen_stop_ends_the_utterance_without_waiting_for_silence(xz_gateway, fake_speak, fake_transcribe):
    box = await booted_box(xz_gateway, mac="a0:b1:c2:00:02:01")
    await box.open()
    await box.listen("manual")
    await box.say(mic(fake_speak, "What time is it?"))  # button released right after: no trailing silence
    await box.stop_listening()
    assert (await _turn(box, fake_transcribe, "What time is it?")).startswith("It is ")
    await box.close()


async def test_an_abort_mid_reply_stops_the_audio_and_ends_the_reply_with_tts_stop(xz_gateway, fake_speak):
    box = await booted_box(xz_gateway, mac="a0:b1:c2:00:03:01")
    await box.open()
    await box.listen("manual")
    await box.say(mic(fake_speak, "Tell me a story."))
    await box.stop_listening()
    await box.wait_until(lambda: box.packets_received >= 3, 30)
    await box.abort()
    await box.wait_for(lambda m: m.get("type") == "tts" and m.get("state") == "stop", 5)
    stop = box.events.index("tts:stop")
    await box.listen("manual")  # the session goes on: the next question is answered
    await box.say(mic(fake_speak, "What time is it?"))
    await box.stop_listening()
    await box.wait_until(lambda: box.events.count("tts:stop") == 2, 30)
    next_start = box.events.index("tts:start", stop)
    assert "audio" not in box.events[stop:next_start]  # no audio of the aborted reply after its stop
    await box.close()


async def test_realtime_mode_speech_during_the_reply_barges_in_and_starts_a_new_turn(xz_gateway, fake_speak):
    box = await booted_box(xz_gateway, mac="a0:b1:c2:00:04:01")
    await box.open()
    await box.listen("realtime")
    await box.say(mic(fake_speak, "Tell me a story."), silence_s=1.0)
    await box.wait_until(lambda: box.packets_received >= 3, 30)
    await box.say(mic(fake_speak, "What time is it?"), silence_s=1.5)  # the box keeps its mic open (AEC)
    await box.wait_for(lambda m: m.get("type") == "stt" and m["text"] == "What time is it?", 30)
    stops = [i for i, e in enumerate(box.events) if e == "tts:stop"]
    second_stt = max(i for i, e in enumerate(box.events) if e == "stt")
    assert stops and stops[0] < second_stt  # the first reply was ended before the new question
    await box.close()


async def test_each_spoken_sentence_gets_a_firmware_emotion_before_its_audio(xz_gateway, fake_speak):
    box = await booted_box(xz_gateway, mac="a0:b1:c2:00:05:01")
    await box.open()
    await box.listen("manual")
    await box.say(mic(fake_speak, "Hello!"))
    await box.stop_listening()
    await box.wait_for(lambda m: m.get("type") == "tts" and m.get("state") == "stop", 30)
    emotions = box.of_type("llm")
    assert emotions and all(m["emotion"] in EMOJI and m["text"] == EMOJI[m["emotion"]] for m in emotions)
    assert box.events.index("llm") < box.events.index("audio")
    await box.close()


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def xz_ptt_gateway(tmp_path_factory: pytest.TempPathFactory, fake_runner) -> AsyncIterator[str]:
    """listen.mode ptt (which holds for a xiaozhi box too), fake engines."""
    async for url in serve_xiaozhi(xiaozhi_cfg(tmp_path_factory.mktemp("xz-ptt"), listen={"mode": "ptt"}), fake_runner):
        yield url


async def test_ptt_mode_hears_only_between_listen_start_and_listen_stop(xz_ptt_gateway, fake_speak, fake_transcribe):
    box = await booted_box(xz_ptt_gateway, mac="a0:b1:c2:00:06:01")
    await box.open()
    await box.say(mic(fake_speak, "Tell me a story."), silence_s=1.5)  # the mic streams, the button is not held
    await box.listen("manual")  # pressed
    await box.say(mic(fake_speak, "What time is it?"))
    await box.stop_listening()  # released
    await box.say(mic(fake_speak, "Hello!"), silence_s=1.5)  # not held again
    assert (await _turn(box, fake_transcribe, "What time is it?")).startswith("It is ")
    await box.listen("manual")
    await box.say(mic(fake_speak, "Turn on the light."))
    await box.stop_listening()
    await box.wait_until(lambda: box.events.count("tts:stop") == 2, 30)
    heard = [m["text"] for m in box.of_type("stt")]  # "Tell me a story" and "Hello" were not heard
    assert len(heard) == 2 and heard[0] == "What time is it?" and heard[1].startswith("Turn on the light"), heard
    await box.close()
