"""Onboarding by activation code (devices.open_enrolment off): an unknown box gets a 6-digit code,
`/activate` answers 202 until the owner runs `gateway devices activate CODE`, then 200; the next
OTA answer carries the token (stored hashed) and the box connects. Codes expire; a wrong code is
refused with a clear message."""

from __future__ import annotations

import argparse
import uuid
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from gateway.cli.devices import run_devices
from gateway.config import GatewayConfig
from gateway.devices import activation
from gateway.devices.auth import OTHER_CLIENT, RENEWED, check_token, enrol_box
from gateway.devices.database import connect
from tests.links.xiaozhi.box import XiaozhiBox, http_post
from tests.links.xiaozhi.conftest import serve_xiaozhi, xiaozhi_cfg

OTA = "/xiaozhi/ota/"


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def closed(tmp_path_factory, fake_runner) -> AsyncIterator[tuple[str, GatewayConfig]]:
    tmp = tmp_path_factory.mktemp("xz-activation")
    cfg = xiaozhi_cfg(tmp, devices={"open_enrolment": False, "database": str(tmp / "gateway.db")})
    async for url in serve_xiaozhi(cfg, fake_runner):
        yield url, cfg


def cli(cfg: GatewayConfig, capsys, action: str, code: str = "") -> tuple[int, str]:
    """`gateway devices ACTION [CODE]` as the command line runs it (same function, same database)."""
    rc = run_devices(argparse.Namespace(devices_action=action, code=code), cfg)
    out = capsys.readouterr()
    return rc, out.out + out.err


async def test_an_unknown_box_is_activated_by_its_code_and_then_connects(closed, capsys, caplog):
    base, cfg = closed
    box = XiaozhiBox(mac="a0:b1:c2:ac:00:01")
    status, reply = await box.ota(base + OTA)
    assert status == 200 and "websocket" not in reply
    act = reply["activation"]
    code = act["code"]
    assert len(code) == 6 and code.isdigit() and code in act["message"] and len(act["challenge"]) >= 16
    assert 0 < act["timeout_ms"] <= cfg.xiaozhi.activation_ttl_s * 1000
    assert any(code in r.getMessage() and "a0:b1:c2:ac:00:01" in r.getMessage() for r in caplog.records)

    assert (await box.ota(base + OTA))[1]["activation"]["code"] == code  # asked again: the same code
    assert await box.activate(base + OTA) == 202  # pending
    rc, out = cli(cfg, capsys, "pending")
    assert rc == 0 and code in out and "xiaozhi-a0b1c2ac0001" in out and box.client_id in out and "a0:b1:c2:ac:00:01" in out

    rc, out = cli(cfg, capsys, "activate", "abc")
    assert rc == 2 and "6 digits" in out
    wrong = "000000" if code != "000000" else "000001"
    rc, out = cli(cfg, capsys, "activate", wrong)
    assert rc == 1 and f"no box is waiting with code {wrong}" in out
    assert await box.activate(base + OTA) == 202  # a wrong code approved nothing

    rc, out = cli(cfg, capsys, "activate", code)
    assert rc == 0 and "xiaozhi-a0b1c2ac0001 approved" in out
    assert await box.activate(base + OTA, serial_number="SN-0001") == 200  # with the challenge + HMAC body too
    status, reply = await box.ota(base + OTA)
    assert "activation" not in reply and len(reply["websocket"]["token"]) >= 24 and box.token

    conn = connect(cfg.path(cfg.devices.database))
    try:
        stored = conn.execute("SELECT token_hash FROM devices WHERE device_id = 'xiaozhi-a0b1c2ac0001'").fetchone()[0]
        assert box.token not in stored and len(stored) == 64  # hashed
        assert activation.list_pending(conn, __import__("time").time()) == []
    finally:
        conn.close()
    hello = await box.open()
    assert hello["type"] == "hello" and hello["session_id"]
    await box.close()
    rc, out = cli(cfg, capsys, "list")
    assert "xiaozhi-a0b1c2ac0001" in out and "a0:b1:c2:ac:00:01" in out and box.client_id in out
    status, reply = await box.ota(base + OTA)  # registered now: the URL without a new token, no code
    assert "activation" not in reply and "token" not in reply["websocket"]
    assert (await http_post(base + OTA + "activate", b"{}", box.ota_headers()))[0] == 200  # a late retry: done


async def test_an_activate_with_a_challenge_that_was_not_issued_is_refused(closed):
    base, _ = closed
    box = XiaozhiBox(mac="a0:b1:c2:ac:00:02")
    await box.ota(base + OTA)
    box.activation = {**box.activation, "challenge": "f" * 32}
    assert await box.activate(base + OTA, serial_number="SN-0002") == 400


async def test_an_activate_from_a_box_without_a_code_or_a_device_id(closed):
    base, _ = closed
    assert (await http_post(base + OTA + "activate", b"{}", {"Device-Id": "a0:b1:c2:ac:00:03"}))[0] == 202
    status, text = await http_post(base + OTA + "activate", b"{}", {"Client-Id": "x"})
    assert status == 400 and b"Device-Id" in text


async def test_a_box_never_activated_cannot_open_its_websocket(closed):
    base, _ = closed
    box = XiaozhiBox(mac="a0:b1:c2:ac:00:04")
    await box.ota(base + OTA)
    box.ws_url = base.replace("http", "ws") + "/xiaozhi/v1/"
    with pytest.raises(Exception):
        await box.open()
    assert box.ws is not None and box.ws.close_code == 1008
    await box.close()


def test_codes_expire_and_an_expired_code_approves_nothing(tmp_path):
    conn = connect(tmp_path / "g.db")
    first = activation.offer(conn, "xiaozhi-1", "MAC 1", 600, now=1000.0)
    assert activation.offer(conn, "xiaozhi-1", "MAC 1", 600, now=1500.0) == first  # still valid: the same
    assert activation.approve(conn, first.code, 600, now=1600.0) is None  # expired at 1600
    assert activation.list_pending(conn, now=1600.0) == []
    second = activation.offer(conn, "xiaozhi-1", "MAC 1", 600, now=1600.0)  # a new code for the next ask
    assert second.created_at == 1600.0 and second.challenge != first.challenge
    assert activation.claim(conn, "xiaozhi-1", "box", now=1601.0) is None  # not approved: no token
    assert activation.approve(conn, second.code, 600, now=1700.0).approved
    assert activation.claim(conn, "xiaozhi-1", "box", now=2400.0) is None  # the approval expired too (1700 + 600)
    third = activation.offer(conn, "xiaozhi-1", "MAC 1", 600, now=2400.0)
    activation.approve(conn, third.code, 600, now=2410.0)
    token = activation.claim(conn, "xiaozhi-1", "box", now=2420.0)
    assert token and check_token(conn, "xiaozhi-1", token) is True
    assert activation.claim(conn, "xiaozhi-1", "box", now=2421.0) is None  # handed over once
    conn.close()


def test_two_waiting_boxes_get_different_codes(tmp_path):
    conn = connect(tmp_path / "g.db")
    codes = {activation.offer(conn, f"xiaozhi-{i}", "", 600, now=0.0).code for i in range(50)}
    assert len(codes) == 50 and all(activation.valid_code(c) for c in codes)
    conn.close()


async def test_the_approved_token_goes_only_to_the_client_id_that_got_the_code(closed, capsys):
    """Someone who knows the box's MAC (it is in every Wi-Fi frame) and asks the OTA URL in a loop
    must not be handed the token the owner approved for the box."""
    base, cfg = closed
    box = XiaozhiBox(mac="a0:b1:c2:ac:00:09")
    stranger = XiaozhiBox(mac="a0:b1:c2:ac:00:09", client_id=str(uuid.uuid4()))
    await stranger.ota(base + OTA)  # asks first: a code of its own
    await box.ota(base + OTA)  # the box's request replaces it: the box shows its own code
    assert box.activation["code"] != stranger.activation["code"]
    rc, _ = cli(cfg, capsys, "activate", stranger.activation["code"])
    assert rc == 1  # replaced: approves nothing
    rc, out = cli(cfg, capsys, "activate", box.activation["code"])  # the owner types what the box shows
    assert rc == 0 and "xiaozhi-a0b1c2ac0009 approved" in out
    status, reply = await stranger.ota(base + OTA)  # it polls, with the box's MAC
    assert status == 200 and "websocket" not in reply and not stranger.token
    assert await box.activate(base + OTA) == 200
    status, reply = await box.ota(base + OTA)
    assert status == 200 and box.token and await stranger.ota(base + OTA) and not stranger.token
    hello = await box.open()
    assert hello["type"] == "hello"
    await box.close()
    conn = connect(cfg.path(cfg.devices.database))
    try:  # bound to the box's Client-Id: with enrolment opened later, the stranger is refused
        assert enrol_box(conn, "xiaozhi-a0b1c2ac0009", "", stranger.client_id, True, 10).outcome == OTHER_CLIENT
        assert enrol_box(conn, "xiaozhi-a0b1c2ac0009", "", box.client_id, True, 10).outcome == RENEWED
    finally:
        conn.close()


def test_a_code_is_claimed_only_with_the_client_id_it_was_given_to(tmp_path):
    conn = connect(tmp_path / "g.db")
    code = activation.offer(conn, "xiaozhi-1", "MAC 1", 600, now=0.0, client_id="uuid-box").code
    assert activation.offer(conn, "xiaozhi-1", "MAC 1", 600, now=1.0, client_id="uuid-box").code == code
    activation.approve(conn, code, 600, now=2.0)
    assert activation.offer(conn, "xiaozhi-1", "x", 600, now=3.0, client_id="uuid-other").code == code  # approved: kept
    assert activation.claim(conn, "xiaozhi-1", "x", now=4.0, client_id="uuid-other") is None
    assert activation.claim(conn, "xiaozhi-1", "x", now=4.0) is None  # no Client-Id: nor
    assert activation.claim(conn, "xiaozhi-1", "box", now=5.0, client_id="uuid-box")
    conn.close()
