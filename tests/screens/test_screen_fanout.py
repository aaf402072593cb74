"""LAN screens: Fay "human" messages per sentence over WebSocket, audio over HTTP, per-device filter."""

from __future__ import annotations

import asyncio
import io
import json
import urllib.error
import urllib.request
import wave

import pytest
from websockets.asyncio.client import connect

from gateway.cli.virtual_box import simulate
from tests.screens.conftest import SCREEN_KEY

pytestmark = pytest.mark.asyncio(loop_scope="session")


def http_get(url: str) -> tuple[int, str, bytes]:
    with urllib.request.urlopen(url, timeout=5) as res:
        return res.status, res.headers.get("Content-Type", ""), res.read()


async def subscribed(ws, device: str) -> None:
    """Choose the device and wait for the hub's ack: from then on nothing for it is missed."""
    await ws.send(json.dumps({"device": device}))
    while json.loads(await asyncio.wait_for(ws.recv(), 5))["Data"]["Key"] != "subscribed":
        pass


async def next_human(ws, key: str) -> dict:
    while True:
        msg = json.loads(await asyncio.wait_for(ws.recv(), 30))
        if msg["Data"]["Key"] == key:
            return msg


async def test_a_screen_gets_fay_messages_with_lips_action_sentiment_and_audio_for_each_sentence(
        fake_screens_gateway, fake_speak) -> None:
    audio, rate = fake_speak("Thank you, goodbye.")
    async with connect(f"{fake_screens_gateway.screen_url}&device=box-screen-1") as ws:
        await subscribed(ws, "box-screen-1")
        sim = asyncio.create_task(simulate(fake_screens_gateway.device_url, audio, rate, device_id="box-screen-1",
                                           speed=2.0, timeout=30))
        transcript = await next_human(ws, "transcript")
        first = await next_human(ws, "audio")
        second = await next_human(ws, "audio")
        end = await next_human(ws, "reply_end")
        await sim
    assert transcript["Username"] == "box-screen-1" and "bye" in transcript["Data"]["Text"].lower()
    assert [first["Data"]["Text"], second["Data"]["Text"]] == ["You are welcome.", "Goodbye!"]
    assert (first["Data"]["IsFirst"], second["Data"]["IsFirst"], end["Data"]["IsEnd"]) == (1, 0, 1)
    assert first["Data"]["Action"] == {"code": "social.thanks", "behavior": "thanks", "affect": "warm",
                                       "intensity": 0.46, "priority": 61}
    assert second["Data"]["Action"]["code"] == "farewell.goodbye"
    assert -2 <= first["Data"]["Sentiment"] <= 2
    for msg in (first, second):
        data = msg["Data"]
        lips_ms = sum(lip["Time"] for lip in data["Lips"])
        assert abs(lips_ms - data["Time"] * 1000) <= 50
        assert {lip["Lip"] for lip in data["Lips"]} <= {"sil", "PP", "FF", "TH", "DD", "kk", "CH", "SS", "nn",
                                                         "RR", "aa", "E", "ih", "oh", "ou"}
        assert data["HttpValue"].startswith("http://127.0.0.1:") and data["HttpValue"].endswith(f"?key={SCREEN_KEY}")
        status, ctype, body = await asyncio.to_thread(http_get, data["HttpValue"])
        assert status == 200 and ctype == "audio/wav"
        with wave.open(io.BytesIO(body)) as w:
            assert abs(w.getnframes() / w.getframerate() - data["Time"]) < 0.01


async def test_a_screen_watching_another_device_gets_nothing_from_this_one(fake_screens_gateway, fake_speak) -> None:
    audio, rate = fake_speak("Thank you.")
    async with connect(f"{fake_screens_gateway.screen_url}&device=someone-else") as other, \
            connect(f"{fake_screens_gateway.screen_url}&device=all") as everyone:
        await subscribed(other, "someone-else")
        await subscribed(everyone, "all")
        await simulate(fake_screens_gateway.device_url, audio, rate, device_id="box-screen-2", speed=2.0, timeout=30)
        assert (await next_human(everyone, "reply_end"))["Username"] == "box-screen-2"
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(other.recv(), 0.3)


async def test_the_page_its_config_and_unknown_paths_are_served_over_http(fake_screens_gateway) -> None:
    status, ctype, body = await asyncio.to_thread(http_get, fake_screens_gateway.http + "/")
    assert status == 200 and ctype.startswith("text/html") and b"Hold to talk" in body
    _, _, cfg = await asyncio.to_thread(http_get, fake_screens_gateway.http + "/config.json")
    assert json.loads(cfg) == {"device_path": "/device", "screen_path": "/screen"}
    with pytest.raises(urllib.error.HTTPError) as info:
        await asyncio.to_thread(http_get, fake_screens_gateway.http + f"/audio/{'A' * 22}.wav?key={SCREEN_KEY}")
    assert info.value.code == 404
