"""Open enrolment through the OTA endpoint, over real HTTP: a box is bound at its first boot to the
Client-Id it keeps, gets a new token at every boot with it, and a request with its MAC and another
Client-Id is refused 403 (its token and name untouched); new boxes are limited per address and in
total; a repeated header is a 400 with one log line."""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest_asyncio
from websockets.datastructures import Headers

from gateway.devices.auth import add_device, get_device, remove_device, rename_device
from gateway.devices.database import connect
from gateway.links.http_front import HttpRequest
from gateway.links.xiaozhi.ota import OtaService
from tests.links.xiaozhi.box import XiaozhiBox
from tests.links.xiaozhi.conftest import serve_xiaozhi, xiaozhi_cfg

OTA = "/xiaozhi/ota/"


@asynccontextmanager
async def running(tmp_path: Path, runner, **xiaozhi: Any) -> AsyncIterator[tuple[str, Path]]:
    """An open-enrolment gateway with these xiaozhi settings: its URL and database."""
    served = serve_xiaozhi(xiaozhi_cfg(tmp_path, xiaozhi=xiaozhi), runner)
    url = await anext(served)
    try:
        yield url, tmp_path / "gateway.db"
    finally:
        await served.aclose()


@pytest_asyncio.fixture(loop_scope="session")
async def gateway(tmp_path, fake_runner) -> AsyncIterator[tuple[str, Path]]:
    async with running(tmp_path, fake_runner) as served:
        yield served


def registry(db: Path, fn, *args: Any) -> Any:
    """What `gateway devices ...` and the console do: the same database, another connection."""
    conn = connect(db)
    try:
        return fn(conn, *args)
    finally:
        conn.close()


async def post(url: str, headers: dict[str, str], body: bytes = b"{}", source: str = "127.0.0.1",
               ) -> tuple[int, dict[str, str], bytes]:
    """A raw HTTP/1.1 POST from `source` (any 127.x address): status, headers, body. `headers`
    may hold a name twice as "Name#2"."""
    hostport, _, path = url.split("://", 1)[1].partition("/")
    host, _, port = hostport.partition(":")
    reader, writer = await asyncio.open_connection(host, int(port), local_addr=(source, 0))
    head = "".join(f"{k.split('#')[0]}: {v}\r\n" for k, v in headers.items())
    writer.write(f"POST /{path} HTTP/1.1\r\nHost: {hostport}\r\n{head}Content-Length: {len(body)}\r\n\r\n".encode() + body)
    await writer.drain()
    data = await asyncio.wait_for(reader.read(), 10)
    writer.close()
    head_bytes, _, payload = data.partition(b"\r\n\r\n")
    status_line, *lines = head_bytes.decode().split("\r\n")
    return int(status_line.split()[1]), {k.lower(): v.strip() for k, _, v in (h.partition(":") for h in lines)}, payload


def box_headers(mac: str, client_id: str | None = None) -> dict[str, str]:
    box = XiaozhiBox(mac=mac, client_id=client_id or "")
    return box.ota_headers()


def warnings(caplog, *parts: str) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.levelno == logging.WARNING and all(p in r.getMessage() for p in parts)]


async def welcomed(box: XiaozhiBox) -> bool:
    """The box's WebSocket hello with the token it holds is answered (not closed auth-failed)."""
    try:
        return (await box.open())["type"] == "hello"
    finally:
        await box.close()


async def test_a_box_gets_a_token_at_every_boot_and_its_mac_with_another_client_id_is_refused(gateway, caplog):
    base, db = gateway
    caplog.set_level(logging.INFO)
    box = XiaozhiBox(mac="a0:b1:c2:e0:00:01")
    assert (await box.ota(base + OTA))[0] == 200 and box.token
    first = box.token
    registry(db, rename_device, "xiaozhi-a0b1c2e00001", "Grandma's kitchen box")  # from the console
    assert (await box.ota(base + OTA))[0] == 200 and box.token != first  # it reboots: a new token, as before
    assert await welcomed(box)

    for _ in range(2):  # someone who knows its MAC (it is in every Wi-Fi frame), with their own Client-Id
        status, _, body = await post(base + OTA, {**box_headers("a0:b1:c2:e0:00:01", str(uuid.uuid4())),
                                                  "User-Agent": "attacker-laptop"})
        assert status == 403 and json.loads(body)["error"] == "client-id-mismatch"
        assert b"token" not in body
    [line] = warnings(caplog, "127.0.0.1", "xiaozhi-a0b1c2e00001", "another Client-Id")  # one line: throttled
    assert "gateway devices remove xiaozhi-a0b1c2e00001" in line

    assert await welcomed(box)  # the real box's token still works
    assert registry(db, get_device, "xiaozhi-a0b1c2e00001").name == "Grandma's kitchen box"
    assert (await box.ota(base + OTA))[0] == 200 and await welcomed(box)  # and it boots as before


async def test_a_box_registered_before_client_ids_were_kept_is_bound_at_its_next_boot(gateway, caplog, tmp_path):
    base, db = gateway
    caplog.set_level(logging.INFO)
    registry(db, add_device, "xiaozhi-a0b1c2e00002", "hall")  # no Client-Id stored: an older registry
    box = XiaozhiBox(mac="a0:b1:c2:e0:00:02")
    assert (await box.ota(base + OTA))[0] == 200 and await welcomed(box)  # trusted on first use
    assert any("trusted on first use" in m and "xiaozhi-a0b1c2e00002" in m for m in caplog.messages)
    stranger = box_headers("a0:b1:c2:e0:00:02", str(uuid.uuid4()))
    assert (await post(base + OTA, stranger))[0] == 403

    owners_token = registry(db, add_device, "xiaozhi-a0b1c2e00002", "hall")  # `gateway devices add`: a new token
    assert await welcomed(XiaozhiBox(mac="a0:b1:c2:e0:00:02", token=owners_token, ws_url=box.ws_url))
    assert (await post(base + OTA, stranger))[0] == 403  # the binding stays
    assert (await box.ota(base + OTA))[0] == 200 and await welcomed(box)

    assert registry(db, remove_device, "xiaozhi-a0b1c2e00002")  # the box's settings were erased: a new Client-Id
    erased = XiaozhiBox(mac="a0:b1:c2:e0:00:02", client_id=str(uuid.uuid4()))
    assert (await erased.ota(base + OTA))[0] == 200 and await welcomed(erased)


async def test_an_ota_request_without_a_client_id_gets_no_token(gateway, caplog):
    base, db = gateway
    headers = box_headers("a0:b1:c2:e0:00:03")
    del headers["Client-Id"]
    status, _, body = await post(base + OTA, headers)
    assert status == 400 and json.loads(body)["error"] == "client-id-required"
    assert warnings(caplog, "a0:b1:c2:e0:00:03", "Client-Id")
    assert registry(db, get_device, "xiaozhi-a0b1c2e00003") is None


async def test_new_boxes_from_one_address_are_limited_and_registered_boxes_and_other_addresses_are_not(
        tmp_path, fake_runner, caplog):
    async with running(tmp_path, fake_runner, enrolments_per_hour_per_address=3) as (base, db):
        await _new_boxes_limited(base, db, caplog)


async def _new_boxes_limited(base: str, db: Path, caplog) -> None:
    macs = [f"a0:b1:c2:e1:00:{i:02x}" for i in range(6)]
    answers = await asyncio.gather(*(post(base + OTA, box_headers(mac)) for mac in macs))  # all at once
    statuses = sorted(status for status, _, _ in answers)
    assert statuses == [200, 200, 200, 429, 429, 429]
    refused = [(h, json.loads(body)) for status, h, body in answers if status == 429]
    assert all(body["error"] == "enrolment-rate-limited" and int(h["retry-after"]) > 0 for h, body in refused)
    assert len(warnings(caplog, "127.0.0.1", "enrolments_per_hour_per_address")) == 1  # once per address
    registered = [mac for mac, (status, _, _) in zip(macs, answers) if status == 200]
    for mac in registered:  # they reboot: no new registration, not limited
        assert (await post(base + OTA, box_headers(mac)))[0] == 200
    assert (await post(base + OTA, box_headers("a0:b1:c2:e1:01:00"), source="127.0.0.2"))[0] == 200
    assert registry(db, lambda c: c.execute("SELECT count(*) FROM devices").fetchone()[0]) == 4


async def test_open_enrolment_registers_at_most_max_enrolled_boxes(tmp_path, fake_runner, caplog):
    async with running(tmp_path, fake_runner, max_enrolled_boxes=2) as (base, db):
        await _at_most_max_enrolled(base, db, caplog)


async def _at_most_max_enrolled(base: str, db: Path, caplog) -> None:
    registry(db, add_device, "kitchen-sensor", "")  # the owner's own devices do not count
    first, second, third = (XiaozhiBox(mac=f"a0:b1:c2:e2:00:0{i}") for i in range(3))
    assert [(await b.ota(base + OTA))[0] for b in (first, second)] == [200, 200]
    status, reply = await third.ota(base + OTA)
    assert status == 403 and json.loads(reply)["error"] == "enrolment-full" and not third.token
    assert warnings(caplog, "xiaozhi.max_enrolled_boxes (2)", "a0:b1:c2:e2:00:02")
    assert (await first.ota(base + OTA))[0] == 200  # a registered box still boots
    assert registry(db, remove_device, "xiaozhi-a0b1c2e20001")
    assert (await third.ota(base + OTA))[0] == 200 and await welcomed(third)


async def test_a_repeated_header_is_answered_400_with_one_log_line(gateway, caplog):
    base, db = gateway
    caplog.set_level(logging.INFO)
    one = box_headers("a0:b1:c2:e3:00:01")
    for name, second in (("Device-Id", "a0:b1:c2:e3:00:02"), ("Client-Id", str(uuid.uuid4()))):
        for path in (OTA, OTA + "activate"):
            caplog.clear()
            status, _, body = await post(base + path, {**one, f"{name}#2": second})
            assert status == 400 and name.lower().encode() in body.lower(), (path, body)
            [line] = [r for r in caplog.records if r.levelno >= logging.WARNING]
            assert line.levelno == logging.WARNING and name.lower() in line.getMessage().lower()
            assert "127.0.0.1" in line.getMessage() and "Traceback" not in caplog.text
    assert registry(db, get_device, "xiaozhi-a0b1c2e30001") is None
    assert (await post(base + OTA, one))[0] == 200  # and it keeps serving


async def test_the_ota_service_itself_answers_a_repeated_header_400(caplog):
    """Whatever HTTP front hands it the request (the gateway's own refuses such requests first)."""
    service = OtaService("/xiaozhi/v1/")
    for name, value in (("Device-Id", "a0:b1:c2:e3:00:02"), ("Client-Id", "c2"), ("User-Agent", "x")):
        headers = Headers([("Device-Id", "a0:b1:c2:e3:00:01"), ("Client-Id", "c1"), ("User-Agent", "box/1.9"),
                           (name, value)])
        for handle in (service.handle, service.activate):
            caplog.clear()
            reply = await handle(HttpRequest("POST", "/xiaozhi/ota/", headers, b"{}", ("127.0.0.1", 1), ("10.0.0.9", 2)))
            assert reply.status == 400 and name.encode() in reply.body
            assert [(r.levelno, "10.0.0.9:2" in r.getMessage() and name in r.getMessage()) for r in caplog.records] \
                == [(logging.WARNING, True)]
