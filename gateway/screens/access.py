"""The screen key: what a LAN screen must show to watch a device's conversation and fetch its
audio (`?key=` on the screen WebSocket and on `/audio/<id>.wav`).

Created on first use in the data folder (`screens.access_key`, mode 0600), printed in the
start-up banner's page URL and by `gateway screens key`; compared in constant time.
"""

from __future__ import annotations

import hmac
import os
import secrets
from pathlib import Path

KEY_BYTES = 18  # 144 random bits, 24 URL-safe characters


def screen_key(path: Path, *, new: bool = False) -> str:
    """The key stored at `path`; made (or, with `new`, replaced) when there is none."""
    if not new and path.exists():
        key = path.read_text(encoding="utf-8").strip()
        if key:
            return key
    key = secrets.token_urlsafe(KEY_BYTES)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(key + "\n")
    return key


def key_matches(given: str | None, key: str) -> bool:
    return given is not None and hmac.compare_digest(given.encode(), key.encode())


def page_url(scheme: str, host: str, port: int, key: str, watch: str = "all") -> str:
    """The page that watches `watch` (a device id or all) with the key."""
    return f"{scheme}://{host}:{port}/?watch={watch}&key={key}"
