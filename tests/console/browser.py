"""What the console's browser tests share: headless Debian chromium and the console's login."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.console.conftest import PASSWORD

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]
AUTOPLAY_ARGS = [*ARGS, "--autoplay-policy=no-user-gesture-required"]  # the Talk page plays reply audio
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"  # the screenshots


async def log_in(page: Any, base: str, password: str = PASSWORD) -> None:
    """Open the console at `base` (http://host:port) on `page` and log in with `password`."""
    await page.goto(f"{base}/console")
    await page.fill("#password", password)
    await page.click("button[type=submit]")
