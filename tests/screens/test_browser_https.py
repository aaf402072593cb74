"""The page in a real headless Chromium opened as from another machine (this machine's LAN
address: the server sees a peer that is not loopback), on the fake engines: over http it moves
to https by itself and may use the microphone; where it may not (a plain-http server, a refused
microphone) "Hold to talk" says why and never shows "thinking"."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from gateway.app import Gateway
from gateway.screens.server import ScreensServer
from gateway.screens.tls import server_context
from tests.screens.test_screens_https import LAN

pytestmark = [pytest.mark.asyncio(loop_scope="session"),
              pytest.mark.skipif(shutil.which("/usr/bin/chromium") is None, reason="needs Debian chromium"),
              pytest.mark.skipif(LAN is None, reason="needs a non-loopback address on this machine")]
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
        "--use-fake-ui-for-media-stream", "--use-fake-device-for-media-stream"]
# Every text the status line shows, in order (the page's own state holds only the last one).
WATCH_STATUS = """
window.__statuses = [];
document.addEventListener("DOMContentLoaded", () => {
  const el = document.getElementById("status");
  new MutationObserver(() => window.__statuses.push(el.textContent)).observe(el, { childList: true, characterData: true, subtree: true });
});
"""
REFUSE_MICROPHONE = """
if (navigator.mediaDevices) navigator.mediaDevices.getUserMedia = () =>
  Promise.reject(new DOMException("Permission denied", "NotAllowedError"));
"""


async def _gateway(cfg, runner, tls) -> AsyncIterator[ScreensServer]:
    screens = ScreensServer("0.0.0.0", 0, "/screen", tls=tls, key="browser-https-key")
    ready = asyncio.Event()
    task = asyncio.create_task(Gateway(cfg, runner, [screens]).serve(ready))
    await asyncio.wait_for(ready.wait(), 10)
    yield screens
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


@pytest_asyncio.fixture(loop_scope="session")
async def secure(fake_cfg, fake_runner, tmp_path: Path) -> AsyncIterator[ScreensServer]:
    async for screens in _gateway(fake_cfg, fake_runner, server_context(tmp_path / "c.pem", tmp_path / "k.pem")):
        yield screens


@pytest_asyncio.fixture(loop_scope="session")
async def plain(fake_cfg, fake_runner) -> AsyncIterator[ScreensServer]:
    async for screens in _gateway(fake_cfg, fake_runner, None):
        yield screens


async def _hold_to_talk(page) -> None:
    box = await page.locator("#talk").bounding_box()
    assert box is not None
    await page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    await page.mouse.down()
    await page.mouse.up()


async def test_the_page_opened_over_http_from_another_machine_moves_to_https_and_may_use_the_microphone(secure) -> None:
    from playwright.async_api import async_playwright

    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        try:
            page = await (await browser.new_context(ignore_https_errors=True)).new_page()
            await page.goto(f"http://{LAN}:{secure.port}/?device=box-lan")
            assert page.url == f"https://{LAN}:{secure.port}/?device=box-lan"
            await page.wait_for_function("() => window.voicebox.status === 'connected as box-lan'", timeout=10_000)
            assert await page.evaluate("window.isSecureContext && !!navigator.mediaDevices")
            box = await page.locator("#talk").bounding_box()
            assert box is not None
            await page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
            await page.mouse.down()  # the fake microphone streams
            await page.wait_for_function("() => window.voicebox.sentMs >= 400", timeout=10_000)
            await page.mouse.up()
            assert await page.evaluate("window.voicebox.micProblem") is None
        finally:
            await browser.close()


async def test_hold_to_talk_on_a_plain_http_page_of_another_machine_says_it_needs_https_and_never_thinks(plain) -> None:
    from playwright.async_api import async_playwright

    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        try:
            page = await browser.new_page()
            await page.add_init_script(WATCH_STATUS)
            await page.goto(f"http://{LAN}:{plain.port}/?device=box-insecure")
            await page.wait_for_function("() => window.voicebox.status === 'connected as box-insecure'", timeout=10_000)
            assert not await page.evaluate("window.isSecureContext")
            await _hold_to_talk(page)
            await page.wait_for_function("() => window.voicebox.status.startsWith('no microphone')", timeout=5_000)
            status = await page.locator("#status").inner_text()
            assert status == (f"no microphone: the browser allows it only on https pages; open "
                              f"https://{LAN}:{plain.port}/ (accept the certificate once)")
            await _hold_to_talk(page)  # again: the same message, nothing sent
            statuses = await page.evaluate("window.__statuses")
            assert "thinking" not in statuses and "listening" not in statuses, statuses
            assert await page.evaluate("window.voicebox.sentMs") == 0
        finally:
            await browser.close()


async def test_a_refused_microphone_says_so_and_never_thinks(secure) -> None:
    from playwright.async_api import async_playwright

    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        try:
            page = await browser.new_page()  # this machine, plain http: a secure context
            await page.add_init_script(WATCH_STATUS)
            await page.add_init_script(REFUSE_MICROPHONE)
            await page.goto(f"http://127.0.0.1:{secure.port}/?device=box-refused")
            await page.wait_for_function("() => window.voicebox.status === 'connected as box-refused'", timeout=10_000)
            await _hold_to_talk(page)
            await page.wait_for_function("() => window.voicebox.status === 'no microphone: permission denied'", timeout=5_000)
            assert await page.locator("#status").inner_text() == "no microphone: permission denied"
            assert "thinking" not in await page.evaluate("window.__statuses")
            assert not await page.locator("#talk").evaluate("b => b.classList.contains('on')")
        finally:
            await browser.close()
