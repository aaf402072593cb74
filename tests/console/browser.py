"""What the console's browser tests share: headless Debian chromium and the console's login."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.console.conftest import PASSWORD

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]
AUTOPLAY_ARGS = [*ARGS, "--autoplay-policy=no-user-gesture-required"]  # the Talk page plays reply audio
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"  # the screenshots


async def console_page(browser: Any, base: str, password: str | None = PASSWORD, **context: Any
                       ) -> tuple[Any, list[str]]:
    """A new page of `browser` (in a new context with `context`: viewport, is_mobile...) and the list
    its page errors are collected in; logged in to the console at `base` unless `password` is None."""
    page = await (await browser.new_context(**context)).new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    if password is not None:
        await log_in(page, base, password)
    return page, errors


async def log_in(page: Any, base: str, password: str = PASSWORD) -> None:
    """Open the console at `base` (http://host:port) on `page` and log in with `password`."""
    await page.goto(f"{base}/console")
    await page.fill("#password", password)
    await page.click("button[type=submit]")
