"""The reply table's YAML is parsed and checked off the event loop (a 60 KB table takes ~100 ms):
while the console checks or saves a table, the loop goes on. The check is held until the loop
has run a callback the check itself scheduled, which only a check on another thread lets happen."""

from __future__ import annotations

import asyncio
import threading

import pytest

from gateway.console import api_replies

pytestmark = pytest.mark.asyncio(loop_scope="session")


@pytest.mark.parametrize("method, api", [("GET", "replies"), ("POST", "replies/check"), ("POST", "replies")])
async def test_checking_a_reply_table_leaves_the_event_loop_free(console_gateway, admin, monkeypatch, method, api) -> None:
    loop = asyncio.get_running_loop()
    free: list[bool] = []
    real = api_replies.parse_reply_table

    def held(data, source):
        ran = threading.Event()
        loop.call_soon_threadsafe(ran.set)  # runs at once, unless this check holds the loop itself
        free.append(ran.wait(10))  # a bound against a hang only: on the loop it never runs
        return real(data, source)

    monkeypatch.setattr(api_replies, "parse_reply_table", held)
    path = console_gateway.cfg.path(console_gateway.cfg.brain.replies)
    original = path.read_text(encoding="utf-8")
    try:
        answer = await admin.request(method, f"/console/api/{api}", None if method == "GET" else {"text": original})
    finally:
        path.write_text(original, encoding="utf-8")
    assert answer.status == 200 and free == [True]
