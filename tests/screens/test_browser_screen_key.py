"""The page as a LAN screen in a real headless Chromium, on the fake engines: with the key it
receives a sentence (and, with autoplay blocked, says "Tap to enable sound"); without the key it
says it was refused; after the screen server restarts it reconnects by itself."""

from __future__ import annotations

import asyncio
import shutil
import socket

import pytest

from gateway.bus import EventBus
from gateway.links.base import LinkServices
from gateway.screens.server import ScreensServer
from gateway.voice.events import Transcribed

pytestmark = [pytest.mark.asyncio(loop_scope="session"),
              pytest.mark.skipif(shutil.which("/usr/bin/chromium") is None, reason="needs Debian chromium")]
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]
# Headless Chromium plays audio without a user gesture whatever --autoplay-policy says; a desktop
# browser refuses play() with NotAllowedError until the page is tapped. This makes it do so.
# (Not by navigator.userActivation: Playwright's evaluations count as user gestures.)
BLOCK_AUTOPLAY = """
let tapped = false;
document.addEventListener("pointerdown", () => { tapped = true; }, true);
const play = HTMLMediaElement.prototype.play;
HTMLMediaElement.prototype.play = function () {
  return tapped ? play.call(this)
    : Promise.reject(new DOMException("play() failed because the user didn't interact", "NotAllowedError"));
};
"""


async def test_the_page_with_the_key_gets_a_sentence_and_asks_for_a_tap_when_autoplay_is_blocked(
        fake_screens_gateway, fake_speak) -> None:
    from playwright.async_api import async_playwright

    from gateway.cli.virtual_box import simulate

    audio, rate = fake_speak("Thank you.")
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        try:
            page = await browser.new_page()
            await page.add_init_script(BLOCK_AUTOPLAY)
            await page.goto(f"{fake_screens_gateway.http}/?watch=box-chromium&key={fake_screens_gateway.key}")
            await page.wait_for_function("window.voicebox.status === 'watching box-chromium'", timeout=10_000)
            await simulate(fake_screens_gateway.device_url, audio, rate, device_id="box-chromium", speed=2.0, timeout=30)
            await page.wait_for_function("window.voicebox.sentences >= 1", timeout=10_000)
            assert await page.locator("#reply").inner_text() == "You are welcome."
            await page.wait_for_function("window.voicebox.soundBlocked === true", timeout=10_000)
            assert await page.locator("#sound").is_visible()
            assert await page.locator("#sound").inner_text() == "Tap to enable sound"
            await page.locator("#sound").click()  # the tap: sound on, the button goes away
            await page.wait_for_function("window.voicebox.soundBlocked === false", timeout=5_000)
            assert not await page.locator("#sound").is_visible()
        finally:
            await browser.close()


async def test_the_page_without_the_key_says_it_was_refused(fake_screens_gateway) -> None:
    from playwright.async_api import async_playwright

    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        try:
            page = await browser.new_page()
            await page.goto(f"{fake_screens_gateway.http}/?watch=all")
            await page.wait_for_function("window.voicebox.status.startsWith('refused')", timeout=10_000)
            assert "screen-key-missing" in await page.locator("#status").inner_text()
        finally:
            await browser.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def _serve_screens(port: int, bus: EventBus) -> tuple[ScreensServer, asyncio.Task[None]]:
    server = ScreensServer("127.0.0.1", port, "/screen", key="restart-key")
    ready = asyncio.Event()
    task = asyncio.create_task(server.serve(None, ready, LinkServices(bus=bus)))
    await asyncio.wait_for(ready.wait(), 10)
    return server, task


async def test_the_page_reconnects_by_itself_after_the_gateway_restarts() -> None:
    from playwright.async_api import async_playwright

    port, bus = _free_port(), EventBus()
    server, task = await _serve_screens(port, bus)
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        try:
            page = await browser.new_page()
            await page.goto(f"http://127.0.0.1:{port}/?watch=all&key=restart-key")
            await page.wait_for_function("window.voicebox.connects === 1", timeout=10_000)
            task.cancel()  # the gateway stops...
            await asyncio.gather(task, return_exceptions=True)
            await page.wait_for_function("window.voicebox.status.startsWith('disconnected')", timeout=10_000)
            server, task = await _serve_screens(port, bus)  # ...and starts again on the same port
            await page.wait_for_function("window.voicebox.connects === 2", timeout=20_000)
            async with asyncio.timeout(10):
                while server.hub.screens == 0:  # the hub has registered the page again
                    await asyncio.sleep(0.05)
            bus.publish(Transcribed("box-back", "hello again"))
            await page.wait_for_function("window.voicebox.transcript === 'hello again'", timeout=10_000)
        finally:
            await browser.close()
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
