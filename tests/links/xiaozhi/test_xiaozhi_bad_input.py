"""Bad input from xiaozhi boxes: each gets the protocol's error behaviour (an HTTP status for the
OTA bootstrap, a WebSocket close code with the reason), a log line naming the box and the reason,
and the gateway keeps serving other boxes."""

from __future__ import annotations

import asyncio
import json
import logging

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from tests.links.xiaozhi.box import BoxClosed, XiaozhiBox, http_post

OTA = "/xiaozhi/ota/"


def ws_url(base: str) -> str:
    return base.replace("http", "ws") + "/xiaozhi/v1/"


async def closed_with(ws, timeout: float = 10) -> tuple[int, str]:
    """Wait until the gateway closes the connection; its close code and reason."""
    with pytest.raises(ConnectionClosed):
        async with asyncio.timeout(timeout):
            while True:
                await ws.recv()
    assert ws.close_code is not None
    return ws.close_code, ws.close_reason or ""


def logged(caplog, *parts: str) -> bool:
    return any(all(p in r.getMessage() for p in parts) for r in caplog.records)


async def still_serves(base: str, mac: str) -> None:
    box = XiaozhiBox(mac=mac)
    assert (await box.ota(base + OTA))[0] == 200
    assert (await box.open())["type"] == "hello"
    await box.close()


HEADERS = {"Device-Id": "a0:b1:c2:0b:ad:01", "Client-Id": "c1", "Protocol-Version": "1"}
HELLO = {"type": "hello", "version": 1, "transport": "websocket",
         "audio_params": {"format": "opus", "sample_rate": 16000, "channels": 1, "frame_duration": 60}}


@pytest.mark.parametrize(("case", "headers", "first", "code", "reason"), [
    ("unknown protocol version", {**HEADERS, "Protocol-Version": "7"}, HELLO, 1002, "unsupported-protocol-version"),
    ("malformed JSON", HEADERS, "{not json", 1007, "malformed-message"),
    ("binary frame before hello", HEADERS, b"\xf8\xff\xfe", 1002, "hello-required"),
    ("oversized frame", HEADERS, b"\x00" * 70000, 1009, "frame-too-large"),
    ("no Device-Id", {"Client-Id": "c1"}, HELLO, 1008, "auth-failed"),
])
async def test_a_bad_box_is_closed_with_a_code_and_a_logged_reason_and_others_are_still_served(
        xz_gateway, caplog, case, headers, first, code, reason):
    caplog.set_level(logging.INFO)
    ws = await connect(ws_url(xz_gateway), additional_headers=headers, compression=None, max_size=None)
    try:
        await ws.send(first if isinstance(first, (str, bytes)) else json.dumps(first))
    except ConnectionClosed:
        pass  # refused on its headers alone, before it could send
    got_code, got_reason = await closed_with(ws)
    assert (got_code, got_reason.split(":")[0]) == (code, reason), case
    assert logged(caplog, headers.get("Device-Id", "Device-Id missing"), reason), case
    await still_serves(xz_gateway, "a0:b1:c2:0b:ad:99")


async def test_a_box_that_sends_no_hello_is_closed_after_the_hello_timeout(xz_gateway, caplog):
    ws = await connect(ws_url(xz_gateway), additional_headers=HEADERS, compression=None)
    code, reason = await closed_with(ws, timeout=10)  # server.hello_timeout_s is 1 here
    assert code == 1002 and reason.startswith("hello-timeout")
    assert logged(caplog, "a0:b1:c2:0b:ad:01", "hello-timeout")


async def test_a_wrong_token_for_an_enrolled_box_is_refused(xz_gateway, caplog):
    box = XiaozhiBox(mac="a0:b1:c2:0b:ad:02")
    assert (await box.ota(xz_gateway + OTA))[0] == 200  # enrolled, with a token
    box.token = "not-the-token"
    with pytest.raises(BoxClosed):
        await box.open()
    assert box.ws is not None and box.ws.close_code == 1008 and "wrong token" in box.ws.close_reason
    assert logged(caplog, "a0:b1:c2:0b:ad:02", "auth-failed")
    await box.close()


async def test_with_enrolment_closed_an_unknown_box_gets_no_websocket_and_cannot_connect(xz_closed_gateway, caplog):
    box = XiaozhiBox(mac="a0:b1:c2:0b:ad:03")
    status, reply = await box.ota(xz_closed_gateway + OTA)
    assert status == 200 and "websocket" not in reply and reply["firmware"]["url"] == ""
    assert "activation" in reply  # it waits for its owner's approval (test_xiaozhi_activation.py)
    assert logged(caplog, "a0:b1:c2:0b:ad:03", "waits for activation")
    box.ws_url = ws_url(xz_closed_gateway)  # a box that knows the URL anyway, without a token
    with pytest.raises(BoxClosed):
        await box.open()
    assert box.ws is not None and box.ws.close_code == 1008 and "unknown device xiaozhi-a0b1c20bad03" in box.ws.close_reason
    await box.close()


@pytest.mark.parametrize(("headers", "body", "status", "says"), [
    ({"Device-Id": "a0:b1:c2:0b:ad:04", "Client-Id": "c"}, b"{broken", 400, b"JSON"),
    ({"Device-Id": "a0:b1:c2:0b:ad:04"}, b"[1, 2]", 400, b"JSON object"),
    ({"Client-Id": "c"}, b"{}", 400, b"Device-Id"),
])
async def test_a_malformed_ota_request_gets_400_with_a_message(xz_gateway, headers, body, status, says):
    got, text = await http_post(xz_gateway + OTA, body, headers)
    assert got == status and says in text
    await still_serves(xz_gateway, "a0:b1:c2:0b:ad:98")
