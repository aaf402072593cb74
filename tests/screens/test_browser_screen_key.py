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
# Autoplay as a desktop browser has it: play() refused with NotAllowedError until the page is
# tapped. Playwright starts Chromium with --autoplay-policy=no-user-gesture-required; take that out.
BLOCK_AUTOPLAY = {"args": [*ARGS, "--autoplay-policy=user-gesture-required"],
                  "ignore_default_args": ["--autoplay-policy=no-user-gesture-required"]}


async def test_the_page_with_the_key_gets_a_sentence_and_asks_for_a_tap_when_autoplay_is_blocked(
        fake_screens_gateway, fake_speak) -> None:
    from playwright.async_api import async_playwright, expect

    from gateway.cli.virtual_box import simulate

    audio, rate = fake_speak("Thank you.")
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, headless=True, **BLOCK_AUTOPLAY)
        try:
            page = await browser.new_page()
            hub = fake_screens_gateway.server.hub
            before = hub.screens
            # Until the page has tried to play, nothing may look into it: Chromium counts Playwright's
            # evaluations and waits on the page as user activation (and then allows autoplay).
            async with page.expect_console_message(lambda m: "autoplay blocked" in m.text, timeout=30_000):
                await page.goto(f"{fake_screens_gateway.http}/?watch=box-chromium&key={fake_screens_gateway.key}")
                async with asyncio.timeout(10):
                    while hub.screens <= before:  # the page is watching
                        await asyncio.sleep(0.05)
                await simulate(fake_screens_gateway.device_url, audio, rate, device_id="box-chromium", speed=2.0, timeout=30)
            await expect(page.locator("#reply")).to_have_text("You are welcome.", timeout=10_000)
            await expect(page.locator("#sound")).to_be_visible(timeout=10_000)
            assert await page.locator("#sound").inner_text() == "Tap to enable sound"
            assert await page.evaluate("window.voicebox.soundBlocked") is True
            await page.locator("#sound").click()  # the tap: sound on, the button goes away
            await page.wait_for_function("() => window.voicebox.soundBlocked === false", timeout=5_000)
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
            await page.wait_for_function("() => window.voicebox.status.startsWith('refused')", timeout=10_000)
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
            await page.wait_for_function("() => window.voicebox.connects === 1", timeout=10_000)
            task.cancel()  # the gateway stops...
            await asyncio.gather(task, return_exceptions=True)
            await page.wait_for_function("() => window.voicebox.status.startsWith('disconnected')", timeout=10_000)
            server, task = await _serve_screens(port, bus)  # ...and starts again on the same port
            await page.wait_for_function("() => window.voicebox.connects === 2", timeout=20_000)
            async with asyncio.timeout(10):
                while server.hub.screens == 0:  # the hub has registered the page again
                    await asyncio.sleep(0.05)
            bus.publish(Transcribed("box-back", "hello again"))
            await page.wait_for_function("() => window.voicebox.transcript === 'hello again'", timeout=10_000)
        finally:
            await browser.close()
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
