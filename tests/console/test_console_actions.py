"""Editing the action rules (expression.action_rules) from the console: checked by the parser the
expression layer uses, every problem with its line, a bad table changes nothing, and a saved
table gives the next reply of `gateway simulate` its new Action code (the expression re-reads the
file). API and headless Chromium."""

from __future__ import annotations

import shutil

import pytest

from firmware_protocol import Action as ActionMessage
from tests.console.browser import ARGS, ARTIFACTS, CHROMIUM, console_page

pytestmark = pytest.mark.asyncio(loop_scope="session")
THANKS = "social.thanks,thanks,warm,0.46,61,1,"


async def _action_codes(console_gateway, fake_speak, question: str) -> list[str]:
    """The Action codes of the reply to `question`, as a simulated box receives them."""
    from gateway.cli.virtual_box import simulate

    audio, rate = fake_speak(question)
    result = await simulate(console_gateway.device_url, audio, rate, device_id="kitchen-box", speed=2.0, timeout=30)
    return [m.code for m in result.expression if isinstance(m, ActionMessage)]


def _renamed(text: str, code: str) -> str:
    line = next(l for l in text.splitlines() if l.startswith(THANKS))
    return text.replace(line, line.replace("social.thanks", code, 1))


async def test_bad_action_rules_are_refused_line_by_line_and_a_good_table_is_used_at_once(console_gateway, admin, fake_speak) -> None:
    path = console_gateway.cfg.path(console_gateway.cfg.expression.action_rules)
    original = path.read_text(encoding="utf-8")
    table = (await admin.request("GET", "/console/api/actions")).json()
    assert table["text"] == original and "social.thanks" in table["codes"] and table["problems"] == []
    lines = original.splitlines()
    try:
        broken = lines[:]
        broken[2] = broken[2].replace(",0.78,", ",1.78,")  # intensity out of range
        broken[4] = "dialogue.confirm,nod,smile,0.42"  # too few columns
        broken_text = "\n".join(broken) + "\n"
        for api in ("actions/check", "actions"):
            answer = await admin.request("POST", f"/console/api/{api}", {"text": broken_text})
            assert answer.status == 400, answer.body
            body = answer.json()
            assert body["line"] == 3 and [p["line"] for p in body["problems"]] == [3, 5]
            assert "intensity must be 0..1" in body["problems"][0]["message"]
            assert "expected 7 columns" in body["problems"][1]["message"]
        bad_header = await admin.request("POST", "/console/api/actions", {"text": "code,behavior\n" + "\n".join(lines[1:])})
        assert bad_header.status == 400 and bad_header.json()["line"] == 1 and "header must be" in bad_header.json()["message"]
        not_text = await admin.request("POST", "/console/api/actions", {"text": 42})
        assert not_text.status == 400 and not_text.json()["field"] == "text"
        assert path.read_text(encoding="utf-8") == original  # nothing changed
        assert await _action_codes(console_gateway, fake_speak, "Thank you.") == ["social.thanks"]

        saved = await admin.request("POST", "/console/api/actions", {"text": _renamed(original, "social.grateful")})
        assert saved.status == 200 and "social.grateful" in saved.json()["codes"]
        assert not [w for w in saved.json()["warnings"] if "social." in w]  # no other file names social.thanks
        no_hello = original.replace("greeting.hello,", "greeting.hi,", 1)  # hints.yaml and device_actions.yaml name it
        warned = (await admin.request("POST", "/console/api/actions/check", {"text": no_hello})).json()["warnings"]
        assert any("hints.yaml names action 'greeting.hello'" in w for w in warned)
        assert any("device_actions.yaml names action 'greeting.hello'" in w for w in warned)
        assert await _action_codes(console_gateway, fake_speak, "Thank you.") == ["social.grateful"]
    finally:
        path.write_text(original, encoding="utf-8")
    assert await _action_codes(console_gateway, fake_speak, "Thank you.") == ["social.thanks"]


@pytest.mark.skipif(shutil.which(CHROMIUM) is None, reason="needs Debian chromium")
async def test_the_replies_page_edits_the_action_rules_with_the_errors_next_to_their_lines(console_gateway, fake_speak) -> None:
    from playwright.async_api import async_playwright, expect

    path = console_gateway.cfg.path(console_gateway.cfg.expression.action_rules)
    original = path.read_text(encoding="utf-8")
    ARTIFACTS.mkdir(exist_ok=True)
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        try:
            page, errors = await console_page(browser, console_gateway.base, viewport={"width": 412, "height": 915})
            await page.wait_for_selector("nav button[data-page=replies]")
            await page.click("nav button[data-page=replies]")
            await expect(page.locator("#act-text")).to_have_value(original)
            lines = original.splitlines()
            lines[3] = lines[3].replace(",72,", ",720,")  # priority out of range, line 4
            await page.fill("#act-text", "\n".join(lines) + "\n")
            await page.click("#act-save")
            bad = page.locator("#act-error li.bad")
            await expect(bad.locator(".message")).to_contain_text("line 4: priority must be 0..255, got 720")
            assert (await bad.inner_text()).startswith("farewell.goodbye,")
            await page.screenshot(path=ARTIFACTS / "console-actions-error-phone.png", full_page=True)
            assert path.read_text(encoding="utf-8") == original
            await page.fill("#act-text", _renamed(original, "social.grateful"))
            await page.click("#act-save")
            await expect(page.locator("#act-status")).to_contain_text("saved")
            assert await _action_codes(console_gateway, fake_speak, "Thank you.") == ["social.grateful"]
            assert errors == []
        finally:
            await browser.close()
            path.write_text(original, encoding="utf-8")
