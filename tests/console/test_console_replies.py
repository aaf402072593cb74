"""Editing the reply table from the console: the same validation as at start (the error and its
line, the file unchanged), and a saved table answers the next question of `gateway simulate`
(the local brain re-reads the file). API and headless Chromium."""

from __future__ import annotations

import shutil

import pytest

from tests.console.browser import ARGS, ARTIFACTS, CHROMIUM, console_page

pytestmark = pytest.mark.asyncio(loop_scope="session")
PILLS = '''  - name: pills
    keywords: ["did i take my pills"]
    answers: ["Yes, at nine this morning."]

'''


def _with_intent(text: str, intent: str) -> str:
    head, marker, rest = text.partition("intents:\n")
    return head + marker + intent + rest


async def _ask(console_gateway, fake_speak, question: str) -> str:
    from gateway.cli.virtual_box import simulate

    audio, rate = fake_speak(question)
    result = await simulate(console_gateway.device_url, audio, rate, device_id="kitchen-box", speed=2.0, timeout=30)
    return result.reply_text


async def test_a_bad_reply_table_is_refused_with_its_line_and_a_good_one_answers_at_once(console_gateway, admin, fake_speak) -> None:
    path = console_gateway.cfg.path(console_gateway.cfg.brain.replies)
    original = path.read_text(encoding="utf-8")
    table = (await admin.request("GET", "/console/api/replies")).json()
    assert table["text"] == original and "thanks" in table["intents"]
    try:
        broken = _with_intent(original, '  - name: pills\n    keywords: ["did i take my pills"]\n\n')  # no answers
        for api in ("replies/check", "replies"):
            answer = await admin.request("POST", f"/console/api/{api}", {"text": broken})
            assert answer.status == 400
            assert "intents[0] (pills)" in answer.json()["message"] and answer.json()["line"] == broken.splitlines().index("  - name: pills") + 1
        bad_yaml = original.replace("intents:\n", "intents:\n  - name: [unclosed\n", 1)
        answer = await admin.request("POST", "/console/api/replies", {"text": bad_yaml})
        assert answer.status == 400 and "not valid YAML" in answer.json()["message"] and answer.json()["line"]
        assert path.read_text(encoding="utf-8") == original  # nothing changed
        assert await _ask(console_gateway, fake_speak, "Did I take my pills?") != "Yes, at nine this morning."

        saved = await admin.request("POST", "/console/api/replies", {"text": _with_intent(original, PILLS)})
        assert saved.status == 200 and saved.json()["intents"][0] == "pills"
        assert await _ask(console_gateway, fake_speak, "Did I take my pills?") == "Yes, at nine this morning."
    finally:
        path.write_text(original, encoding="utf-8")


@pytest.mark.skipif(shutil.which(CHROMIUM) is None, reason="needs Debian chromium")
async def test_the_replies_page_shows_the_error_next_to_its_line_and_saves_a_good_table(console_gateway, fake_speak) -> None:
    from playwright.async_api import async_playwright, expect

    path = console_gateway.cfg.path(console_gateway.cfg.brain.replies)
    original = path.read_text(encoding="utf-8")
    ARTIFACTS.mkdir(exist_ok=True)
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        try:
            page, _ = await console_page(browser, console_gateway.base, viewport={"width": 412, "height": 915})
            await page.wait_for_selector("nav button[data-page=replies]")
            await page.click("nav button[data-page=replies]")
            await expect(page.locator("#rep-text")).to_have_value(original)
            broken = _with_intent(original, '  - name: pills\n    keywords: ["did i take my pills"]\n    answers: []\n\n')
            await page.fill("#rep-text", broken)
            await page.click("#rep-save")
            line = broken.splitlines().index("  - name: pills") + 1
            bad = page.locator("#rep-error li.bad")  # the line itself, the message right under it
            await expect(bad.locator(".message")).to_contain_text(f"line {line}: ")
            await expect(bad.locator(".message")).to_contain_text("intents[0] (pills): answers is missing or empty")
            assert (await bad.inner_text()).startswith("  - name: pills")
            assert await page.locator("#rep-error").get_attribute("start") == str(line - 2)
            await page.screenshot(path=ARTIFACTS / "console-replies-error-phone.png", full_page=True)
            assert path.read_text(encoding="utf-8") == original
            await page.fill("#rep-text", _with_intent(original, PILLS))
            await page.click("#rep-save")
            await expect(page.locator("#rep-status")).to_contain_text("saved")
            assert await _ask(console_gateway, fake_speak, "Did I take my pills?") == "Yes, at nine this morning."
        finally:
            await browser.close()
            path.write_text(original, encoding="utf-8")
