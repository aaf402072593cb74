"""The Talk page's data against a running gateway (fake engines, real databases): a `gateway
simulate` turn is in GET talk with its latency, the brain that answered and its reply audio (a
WAV as the device got it), and is pushed on the live WebSocket as it happens; no route and no
live socket without a session, nor from another origin; the socket closes when the session ends.
And in headless Chromium: the question appears on the Talk page without a reload, with its
latency and brain, and its audio plays."""

from __future__ import annotations

import asyncio
import io
import json
import shutil
import wave

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from tests.console.browser import AUTOPLAY_ARGS as ARGS, ARTIFACTS, CHROMIUM, log_in
from tests.console.conftest import Client

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def _ask(console_gateway, fake_speak, question: str, device_id: str = "talk-box"):
    from gateway.cli.virtual_box import simulate

    audio, rate = fake_speak(question)
    return await simulate(console_gateway.device_url, audio, rate, device_id=device_id, speed=2.0, timeout=30)


def _live(console_gateway, client: Client, origin: str | None = None):
    headers = {"Cookie": client.cookie} if client.cookie else {}
    return connect(f"ws://{console_gateway.host}/console/api/live", additional_headers=headers,
                   origin=origin or f"http://{console_gateway.host}", open_timeout=10)


async def _next_turn(ws, said: str, timeout: float = 30.0) -> dict:
    """The first finished turn update whose transcript is `said`."""
    async with asyncio.timeout(timeout):
        while True:
            message = json.loads(await ws.recv())
            if message["type"] == "turn" and message["turn"]["said"] == said and message["turn"]["done"]:
                return message["turn"]


async def test_the_live_socket_gets_each_turn_as_it_happens_and_the_api_keeps_it(console_gateway, admin, fake_speak) -> None:
    async with _live(console_gateway, admin) as ws:
        assert json.loads(await ws.recv()) == {"type": "ready"}
        asking = asyncio.create_task(_ask(console_gateway, fake_speak, "Thank you."))
        turn = await _next_turn(ws, "Thank you.")
        result = await asking
    assert turn["answered"] == "You are welcome." == result.reply_text
    assert turn["device_id"] == "talk-box" and turn["person"]  # its memory user (memory.users, else its own id)
    assert turn["brain"] == "local" and turn["latency_ms"] > 0 and not turn["aborted"]
    assert turn["audio"] and turn["audio_seconds"] > 0

    listed = (await admin.request("GET", f"/console/api/talk?person={turn['person']}&device=talk-box")).json()
    assert listed["turns"][0]["id"] == turn["id"]
    assert (await admin.request("GET", "/console/api/talk?person=nobody")).json()["turns"] == []
    wav = await admin.request("GET", f"/console/api/{turn['audio']}")
    assert wav.status == 200 and wav.headers["content-type"] == "audio/wav"
    assert wav.headers["content-disposition"].startswith("inline")
    with wave.open(io.BytesIO(wav.body)) as w:  # the reply's sentences as the TTS made them for the device
        seconds = w.getnframes() / w.getframerate()
        assert w.getnchannels() == 1 and w.getsampwidth() == 2
    assert abs(seconds - turn["audio_seconds"]) < 0.05 and abs(seconds - result.audio_seconds) < 0.25


async def test_an_answer_from_the_memory_names_the_memory(console_gateway, admin, fake_speak) -> None:
    async with _live(console_gateway, admin) as ws:
        assert json.loads(await ws.recv()) == {"type": "ready"}
        asking = asyncio.create_task(_ask(console_gateway, fake_speak, "What is my name?", "kitchen-box"))
        turn = await _next_turn(ws, "What is my name?")
        await asking
    assert turn["brain"] == "memory" and "name" in turn["answered"]


async def test_bad_talk_requests_get_a_clear_error(admin) -> None:
    for path, status in (("talk?n=0", 400), ("talk/audio?id=../../etc", 400), ("talk/audio?id=unknownturn12", 404)):
        answer = await admin.request("GET", f"/console/api/{path}")
        assert answer.status == status, path
        assert answer.json()["field"] in ("n", "id")


async def test_every_api_route_and_the_live_socket_refuse_without_a_session(console_gateway, client, caplog) -> None:
    routes = console_gateway.gateway.console.api_routes()
    assert {("GET", "talk"), ("GET", "talk/audio"), ("GET", "actions"), ("POST", "actions")} <= set(routes)
    for method, path in routes:
        answer = await client.request(method, f"/console/api/{path}", None if method == "GET" else {})
        assert answer.status == 401, (method, path)
    with pytest.raises(InvalidStatus) as refused:
        async with _live(console_gateway, client):
            pass
    assert refused.value.response.status_code == 401
    wrong = Client(console_gateway.host, cookie="gw_console=not-a-session")
    with pytest.raises(InvalidStatus) as refused:
        async with _live(console_gateway, wrong):
            pass
    assert refused.value.response.status_code == 401
    assert "WebSocket /console/api/live refused: no session" in caplog.text


async def test_a_cross_site_live_socket_is_refused(console_gateway, admin, caplog) -> None:
    with pytest.raises(InvalidStatus) as refused:
        async with _live(console_gateway, admin, origin="http://evil.example"):
            pass
    assert refused.value.response.status_code == 403
    assert "cross-site WebSocket from 'http://evil.example'" in caplog.text


async def test_the_live_socket_closes_when_its_session_ends(console_gateway) -> None:
    leaving = Client(console_gateway.host)
    assert (await leaving.login()).status == 200
    async with _live(console_gateway, leaving) as ws:
        assert json.loads(await ws.recv()) == {"type": "ready"}
        assert (await leaving.request("POST", "/console/api/logout", {})).status == 200
        with pytest.raises(ConnectionClosed):
            async with asyncio.timeout(15):  # checked every few seconds
                while True:
                    await ws.recv()
        assert ws.close_code == 4401


@pytest.mark.skipif(shutil.which(CHROMIUM) is None, reason="needs Debian chromium")
async def test_a_question_appears_on_the_talk_page_live_and_its_audio_plays(console_gateway, fake_speak) -> None:
    from playwright.async_api import async_playwright, expect

    ARTIFACTS.mkdir(exist_ok=True)
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        try:
            page = await browser.new_page(viewport={"width": 412, "height": 915})
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            requests: list[str] = []
            page.on("request", lambda r: requests.append(r.url))
            await log_in(page, console_gateway.base)
            await page.wait_for_selector("nav button[data-page=conversations]")
            await page.click("nav button[data-page=conversations]")
            await expect(page.locator("#c-live")).to_have_text("live", timeout=10_000)  # everyone's turns
            before = len([u for u in requests if "/console/api/talk?" in u])
            result = await _ask(console_gateway, fake_speak, "Good morning.")
            row = page.locator("#c-table tbody tr", has_text="Good morning.")
            await row.wait_for(timeout=15_000)
            await expect(row.locator("td.brain")).to_have_text("local")
            await expect(row.locator("td.latency")).to_contain_text(" ms")
            await expect(row).to_contain_text(result.reply_text)
            audio = row.locator("audio")
            await audio.wait_for()
            duration = await audio.evaluate(
                "a => new Promise((ok, fail) => { if (a.readyState >= 1) ok(a.duration);"
                " a.addEventListener('loadedmetadata', () => ok(a.duration)); a.addEventListener('error', () => fail('audio error')); a.load(); })")
            assert duration > 0.1
            await audio.evaluate("a => a.play()")
            await expect(audio).to_have_js_property("paused", False)
            await page.screenshot(path=ARTIFACTS / "console-talk-phone.png", full_page=True)
            after = len([u for u in requests if "/console/api/talk?" in u])
            assert after == before  # it came over the live socket, not by asking again
            assert errors == []
        finally:
            await browser.close()
