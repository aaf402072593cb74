"""The console of every member follows every device: a turn served by one member is on another's Talk page.

Two member processes with their LAN screens and the web console on (fake voice engines: the turn's
content is what is checked, not the models) behind a real mosquitto, on the embedded PostgreSQL.
An emulated MQTT voice box is served by one of them; an admin logged in to the other member's
console has its live WebSocket open. The box asks a question; the live socket gets the turn
(transcript, reply, brain and latency, naming the member that served it, no audio: that stays on
the serving member), the Talk API keeps it, and the Devices API names the serving member; in a
browser, the other member's Devices page names the serving member and its Talk page shows the turn
with "audio on <member>" instead of a player.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import pytest
from websockets.asyncio.client import connect

from gateway.links.mosquitto import find_mosquitto
from tests.cluster.served_box import box_served_by_one
from tests.console.conftest import Client
from tests.console.browser import AUTOPLAY_ARGS as ARGS, ARTIFACTS, CHROMIUM, console_page
from tests.links.conftest import free_port

pytestmark = pytest.mark.skipif(find_mosquitto() is None, reason="needs mosquitto (Debian package mosquitto)")

MEMBERS = ["gw-a", "gw-b"]
BOX = "console-box-1"
PASSWORD = "cluster console password"


def extra(ports: dict[str, int]) -> dict[str, dict]:
    """Each member's LAN screens on its own port, and the console on."""
    return {m: {"screens_port": ports[m], "console_password": PASSWORD} for m in MEMBERS}


async def finished_turn(ws, device_id: str) -> tuple[list[dict], dict]:
    """Every turn update of `device_id` until its turn is done (the updates, the last)."""
    updates = []
    async with asyncio.timeout(30):
        while True:
            message = json.loads(await ws.recv())
            if message["type"] == "turn" and message["turn"]["device_id"] == device_id:
                updates.append(message["turn"])
                if message["turn"]["done"]:
                    return updates, message["turn"]


async def test_a_turn_served_by_one_member_is_live_on_the_others_console_which_names_the_member(
        postgres_dsn, tmp_path: Path, fake_speak):
    ports = {m: free_port() for m in MEMBERS}
    async with box_served_by_one(tmp_path, postgres_dsn, MEMBERS, BOX, extra(ports)) as (rig, box, server, other):
        admin = Client(f"127.0.0.1:{ports[other]}")
        assert (await admin.login(PASSWORD)).status == 200
        refused = await Client(admin.host).request("GET", "/console/api/talk")
        async with connect(f"ws://{admin.host}/console/api/live", additional_headers={"Cookie": admin.cookie},
                           origin=f"http://{admin.host}", open_timeout=10) as live:
            assert json.loads(await live.recv()) == {"type": "ready"}
            audio, rate = fake_speak("Thank you, goodbye.")
            (updates, turn), result = await asyncio.gather(finished_turn(live, BOX), box.ask(audio, rate, timeout=30))
        talk = (await admin.request("GET", f"/console/api/talk?device={BOX}")).json()
        async with asyncio.timeout(10):  # the directory record of the lease, retained on the broker
            while True:
                devices = (await admin.request("GET", "/console/api/devices")).json()
                entry = next((d for d in devices["cluster"]["devices"] if d["device_id"] == BOX), None)
                if entry is not None and entry["gateway"] is not None:
                    break
                await asyncio.sleep(0.1)
        own = Client(f"127.0.0.1:{ports[server]}")
        assert (await own.login(PASSWORD)).status == 200
        served_talk = (await own.request("GET", f"/console/api/talk?device={BOX}")).json()

    assert refused.status == 401  # the Talk API of the other member needs its session like any
    assert "bye" in turn["said"].lower() and updates[0]["said"] == turn["said"] and not updates[0]["done"]
    assert turn["answered"] == result.reply_text == "You are welcome. Goodbye!"
    assert turn["gateway"] == server and turn["audio"] is None and turn["audio_seconds"] == 0
    assert turn["brain"] == "local" and turn["latency_ms"] is not None and turn["latency_ms"] > 0
    assert not turn["aborted"] and not turn["failed"]
    assert [t["id"] for t in talk["turns"]] == [turn["id"]] and talk["turns"][0] == turn
    # the serving member keeps the turn with its audio
    (mine,) = served_talk["turns"]
    assert mine["gateway"] is None and mine["audio"] and mine["answered"] == turn["answered"]
    assert devices["cluster"]["member"] == other
    assert entry == entry | {"online": True, "gateway": server} and entry["epoch"] >= 1
    assert f"cluster {other}: ignored" not in rig.log(other)


@pytest.mark.skipif(shutil.which(CHROMIUM) is None, reason="needs Debian chromium")
async def test_the_other_members_console_pages_show_the_turn_and_the_serving_member(postgres_dsn, tmp_path: Path,
                                                                                   fake_speak):
    from playwright.async_api import async_playwright, expect

    ports = {m: free_port() for m in MEMBERS}
    async with box_served_by_one(tmp_path, postgres_dsn, MEMBERS, BOX, extra(ports)) as (_rig, box, server, other):
        async with async_playwright() as pw:
            browser = await pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
            try:
                page, errors = await console_page(browser, f"http://127.0.0.1:{ports[other]}", PASSWORD)
                row = page.locator("#cluster-devices tbody tr", has_text=BOX)  # the Devices page, first shown
                await expect(row.locator("td.served-by")).to_have_text(server, timeout=15_000)
                await expect(page.locator("#cluster-member")).to_have_text(f"this gateway is member {other}")
                ARTIFACTS.mkdir(exist_ok=True)
                await page.screenshot(path=ARTIFACTS / "console-cluster-devices.png", full_page=True)
                await page.click("nav button[data-page=conversations]")
                await expect(page.locator("#c-live")).to_have_text("live", timeout=10_000)
                audio, rate = fake_speak("Thank you, goodbye.")
                result = await box.ask(audio, rate, timeout=30)
                turn = page.locator("#c-table tbody tr", has_text=BOX)
                await expect(turn.locator("td.audio")).to_have_text(f"audio on {server}", timeout=15_000)
                await expect(turn).to_contain_text(result.reply_text)
                await expect(turn.locator("td.brain")).to_have_text("local")
                await expect(turn.locator("td.latency")).to_contain_text(" ms")
                await page.screenshot(path=ARTIFACTS / "console-cluster-talk.png", full_page=True)
                assert await turn.locator("audio").count() == 0 and errors == []
            finally:
                await browser.close()
