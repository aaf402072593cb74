"""The screens of every member follow every device: a turn served by one member is seen on another's.

Two member processes with their LAN screens on (fake voice engines: the turn's content is what is
checked, not the models) behind a real mosquitto. An emulated MQTT voice box is served by one of
them; a screen WebSocket is connected to the other. The box asks a question; the screen sees the
transcript, each sentence (text, lips, action, naming the member that spoke it, no audio URL: the
audio stays on that member) and the reply's end, through `P/$cluster/events/<device>`.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from websockets.asyncio.client import connect

from gateway.links.mosquitto import find_mosquitto
from tests.cluster.served_box import box_served_by_one
from tests.links.conftest import free_port

pytestmark = pytest.mark.skipif(find_mosquitto() is None, reason="needs mosquitto (Debian package mosquitto)")

MEMBERS = ["gw-a", "gw-b"]
BOX = "screen-box-1"


async def human_until_reply_end(ws) -> list[dict]:
    out = []
    async with asyncio.timeout(30):
        while True:
            msg = json.loads(await ws.recv())
            if msg.get("Topic") == "human":
                out.append(msg)
                if msg["Data"]["Key"] == "reply_end":
                    return out


async def test_a_screen_on_one_member_sees_the_turn_of_a_box_served_by_another(postgres_dsn, tmp_path: Path,
                                                                               fake_speak):
    ports = {m: free_port() for m in MEMBERS}
    async with box_served_by_one(tmp_path, postgres_dsn, MEMBERS, BOX,
                                 {m: {"screens_port": ports[m]} for m in MEMBERS}) as (rig, box, server, other):
        key = (tmp_path / other / "screens-access-key").read_text().strip()
        async with connect(f"ws://127.0.0.1:{ports[other]}/screen?key={key}") as screen:
            await screen.send(json.dumps({"device": BOX}))
            while json.loads(await asyncio.wait_for(screen.recv(), 10))["Data"]["Key"] != "subscribed":
                pass
            audio, rate = fake_speak("Thank you, goodbye.")
            turn, result = await asyncio.gather(human_until_reply_end(screen), box.ask(audio, rate, timeout=30))

    assert result.reply_text and {m["Username"] for m in turn} == {BOX}
    keys = [m["Data"]["Key"] for m in turn]
    assert keys[0] == "transcript" and "bye" in turn[0]["Data"]["Text"].lower()
    sentences = [m["Data"] for m in turn if m["Data"]["Key"] == "audio"]
    assert [s["Text"] for s in sentences] == ["You are welcome.", "Goodbye!"] == result.sentences
    assert all(s["Gateway"] == server and "HttpValue" not in s and s["Lips"] for s in sentences)
    assert sentences[0]["Action"]["code"] == "social.thanks" and sentences[0]["IsFirst"] == 1
    assert keys[-1] == "reply_end" and turn[-1]["Data"]["IsEnd"] == 1
    assert f"cluster {other}: ignored" not in rig.log(other)
