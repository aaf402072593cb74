"""The console in a real headless Chromium (Debian's) against a running gateway with real
databases: log in, approve a waiting box, add a device and connect it with the credentials the
page shows, and see its blood-pressure readings appear in the chart (two lines and the pulse,
with the memory rule's thresholds drawn); a spoken turn appears on the Talk page; the memory
search finds the readings; a memory is deleted from the page. Screenshots go to test-artifacts/ (not committed)."""

from __future__ import annotations

import re
import shutil
import time

import pytest

from gateway.devices import activation

from tests.console.browser import ARGS, ARTIFACTS, CHROMIUM, console_page
from tests.console.conftest import PASSWORD
from tests.console.test_console_api import _connect, _send_reading

pytestmark = [pytest.mark.asyncio(loop_scope="session"),
              pytest.mark.skipif(shutil.which("/usr/bin/chromium") is None, reason="needs Debian chromium")]
PHONE = {"width": 412, "height": 915}
HISTORY = [(128, 82, 68), (134, 85, 72), (126, 80, 66), (139, 88, 74), (131, 84, 70), (145, 92, 79), (129, 83, 69),
           (136, 86, 71), (124, 79, 65), (133, 85, 73), (142, 91, 76), (130, 84, 70), (127, 81, 67)]


async def test_a_carer_logs_in_approves_a_box_adds_a_cuff_and_sees_its_readings_in_the_chart(console_gateway, fake_speak) -> None:
    from playwright.async_api import async_playwright, expect

    from gateway.cli.virtual_box import simulate

    ARTIFACTS.mkdir(exist_ok=True)
    db, ttl = console_gateway.gateway.db, console_gateway.cfg.xiaozhi.activation_ttl_s
    waiting = await db.run(activation.offer, "aa:bb:cc:dd:ee:07", "MAC aa:bb:cc:dd:ee:07, board bread-compact-wifi",
                           ttl, time.time())
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        try:
            page, errors = await console_page(browser, console_gateway.base, None, viewport=PHONE)  # not logged in
            answer = await page.goto(f"{console_gateway.base}/console")
            assert answer is not None and answer.status == 401  # the login form, no data
            await page.fill("#password", "not the password")
            await page.click("button[type=submit]")
            await expect(page.locator("#login-error")).to_have_text("wrong password")  # (no eval: the page's CSP forbids it)
            await page.fill("#password", PASSWORD)
            await page.click("button[type=submit]")
            await page.wait_for_selector("#pending td.code")

            # approve the waiting box by its code
            row = page.locator("#pending tbody tr", has_text=waiting.code)
            await row.get_by_role("button", name="Approve").click()
            await row.get_by_text("approved, waiting for the box").wait_for(timeout=10_000)
            assert (await db.run(activation.get, waiting.device_id, time.time())).approved

            # add a cuff and connect it with the credentials the page shows
            await page.fill("#add-id", "box-anna")
            await page.fill("#add-name", "Anna's cuff")
            await page.click("#add button[type=submit]")
            await page.wait_for_selector("#credentials:not(.hidden)")
            firmware = await page.locator("#cred-firmware").inner_text()
            token = re.search(r'GATEWAY_TOKEN\s+"([^"]+)"', firmware).group(1)
            ws = await _connect(console_gateway.device_url, "box-anna", token)
            try:
                await page.locator("#connected tbody tr", has_text="box-anna").wait_for(timeout=10_000)
                await page.screenshot(path=ARTIFACTS / "console-devices-phone.png", full_page=True)
                for i, (sys_, dia, pulse) in enumerate(HISTORY):  # the cuff's stored week, twice a day
                    await _send_reading(ws, 101 + i, sys_, dia, pulse, ago_s=(len(HISTORY) - i) * 12 * 3600)

                await page.click("nav button[data-page=readings]")
                await page.select_option("#r-person", "anna")
                await expect(page.locator("#r-kind option[value=blood_pressure]")).to_have_count(1)
                await page.select_option("#r-kind", "blood_pressure")
                await expect(page.locator("#r-chart line.threshold")).to_have_count(2)
                before = await page.locator("#r-chart circle.point").count()
                assert before >= 3 * len(HISTORY)  # systolic, diastolic and pulse of each reading
                await _send_reading(ws, 200, 151, 94, 77)  # above the rule's 140/90: shown above its lines
                await expect(page.locator("#r-chart circle.point")).to_have_count(before + 3, timeout=15_000)
            finally:
                await ws.close()
            assert "alert above 140" in await page.locator("#r-chart").inner_html()
            assert await page.locator("#r-table tbody tr", has_text="systolic 151 mmHg").count() == 1
            legend = await page.locator("#r-legend").inner_text()
            assert "systolic" in legend and "diastolic" in legend
            await page.screenshot(path=ARTIFACTS / "console-readings-phone.png", full_page=True)
            await page.set_viewport_size({"width": 1000, "height": 800})
            await page.screenshot(path=ARTIFACTS / "console-readings.png", full_page=True)

            # a spoken turn appears on the Talk page by itself; the memory finds it
            audio, rate = fake_speak("Thank you.")
            await simulate(console_gateway.device_url, audio, rate, device_id="box-anna", speed=2.0, timeout=30, token=token)
            await page.click("nav button[data-page=conversations]")
            await page.select_option("#c-person", "anna")
            await page.locator("#c-table tbody tr", has_text="You are welcome.").first.wait_for(timeout=15_000)
            await page.click("nav button[data-page=memory]")
            await page.select_option("#m-person", "anna")
            await page.fill("#m-q", "blood pressure")
            await page.click("#m-form button[type=submit]")
            await expect(page.locator("#m-title")).to_have_text('Best matches for "blood pressure"')
            await page.locator("#m-table tbody tr", has_text="blood pressure").first.wait_for(timeout=15_000)
            await page.screenshot(path=ARTIFACTS / "console-memory.png", full_page=True)
            # delete a memory from the page
            memory = console_gateway.gateway.memory
            await memory.remember("anna", "The spare key is under the blue flower pot")
            page.once("dialog", lambda dialog: dialog.accept())
            await page.fill("#m-q", "spare key")
            await page.click("#m-form button[type=submit]")
            row = page.locator("#m-table tbody tr", has_text="under the blue flower pot")
            await row.get_by_role("button", name="Delete").click()
            await expect(row).to_have_count(0)
            assert not [r for r in await memory.search("anna", "spare key", 5) if "blue flower pot" in r.node.content]

            await page.click("nav button[data-page=health]")
            await page.locator("#h-ports", has_text="screens.port").wait_for()
            await page.click("#h-run")
            await page.locator("#h-checks tbody tr", has_text="model").first.wait_for(timeout=60_000)
            await page.click("#logout")
            await page.wait_for_selector("#login")
            assert errors == []
        finally:
            await browser.close()
