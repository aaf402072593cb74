"""A CoAP session's inbox is bounded: while the session is stuck with INBOX_MESSAGES waiting, a
POST from libcoap's coap-client is answered 5.03 `busy` (nothing queued, logged once), and once
the session catches up the device's next POST is taken again."""

from __future__ import annotations

import asyncio
import logging
import shutil
from pathlib import Path

import pytest

from firmware_protocol import Hello, Ping, Pong, Welcome, encode
from gateway.links.base import LinkClosed
from gateway.links.coap import INBOX_MESSAGES, CoapLink
from tests.links.test_coap_link import coap_raw, free_udp_port, hello, post

pytestmark = [
    pytest.mark.asyncio(loop_scope="session"),
    pytest.mark.skipif(shutil.which("coap-client-notls") is None, reason="needs libcoap3-bin"),
]
DEVICE = "coap-busy"


async def test_a_full_session_inbox_answers_503_busy_and_takes_posts_again_once_drained(tmp_path: Path, caplog):
    primed, go_on = asyncio.Event(), asyncio.Event()
    answered: list[int] = []

    async def stuck_session(conn) -> None:
        await conn.receive()  # the Hello
        await conn.send(Welcome(session_id="t0ken"))
        await conn.receive()  # waiting with nothing queued: the Hello's response goes out now
        primed.set()
        await go_on.wait()  # then the core falls behind
        try:
            while True:
                item = await conn.receive()
                if isinstance(item, Ping):
                    answered.append(item.nonce)
                    await conn.send(Pong(nonce=item.nonce))
        except LinkClosed:
            pass

    link = CoapLink("127.0.0.1", free_udp_port())
    ready = asyncio.Event()
    task = asyncio.create_task(link.serve(stuck_session, ready))
    try:
        await asyncio.wait_for(ready.wait(), 10)
        base = f"coap://127.0.0.1:{link.port}/gw"
        token = await hello(base, DEVICE, tmp_path, Hello(device_id=DEVICE))
        conn = link.connections[DEVICE]
        conn.deliver(Ping(nonce=4242))
        await asyncio.wait_for(primed.wait(), 10)
        for nonce in range(INBOX_MESSAGES):  # a backlog the stuck session has not read
            assert conn.deliver(Ping(nonce=nonce))
        payload = tmp_path / "ping.bin"
        payload.write_bytes(encode(Ping(nonce=9999)))
        with caplog.at_level(logging.WARNING, logger="gateway.links.coap"):
            out, err = await coap_raw("-m", "post", "-f", str(payload), f"{base}/{DEVICE}/up?s={token}")
        assert out == b"" and err.startswith("5.03 busy: the session's inbox is full"), err
        assert "coap 127.0.0.1:" in caplog.text and f"({DEVICE}): inbox full" in caplog.text
        assert conn.dropped_up == 1

        go_on.set()  # the session catches up: the backlog is answered, the refused Ping never arrived
        for _ in range(200):
            if len(answered) == INBOX_MESSAGES:
                break
            await asyncio.sleep(0.05)
        assert answered == list(range(INBOX_MESSAGES))
        *backlog, pong = await post(base, DEVICE, Ping(nonce=7), tmp_path, token=token)
        assert backlog == [Pong(nonce=n) for n in range(INBOX_MESSAGES)]  # none fetched yet: they come along
        assert pong == Pong(nonce=7) and answered[-1] == 7
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
