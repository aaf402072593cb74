"""The state a device needs wherever it is served (issue 17.2), on two gateways composed by
build_gateway (as `gateway run` does) with their device WebSocket, xiaozhi OTA and console on real
sockets: the LLM brain's conversation history per person, the console's device -> person mapping,
the xiaozhi activation codes and the console's reading lists.

`postgres`: two gateways on one real PostgreSQL, what one writes the other reads (after a
failover the device's next utterance is served by the other). `sqlite`: the single box, the same
steps on one gateway (its history in RAM, its mapping and codes in the devices database).
"""

from __future__ import annotations

import asyncio
import csv
import io
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import psycopg
import pytest_asyncio
from websockets.asyncio.client import connect

from firmware_protocol import Hello, ReadingAck, ReadingStatus, SensorReading, Welcome, decode, encode
from gateway.app import Gateway, build_gateway
from gateway.brain.contract import BrainContext
from gateway.brain.scripted import Script, ScriptedLlm
from gateway.config import parse_config
from gateway.console.password import PasswordFile
from gateway.devices.auth import SqliteDeviceRegistry
from gateway.devices.people import FOLLOW_S
from gateway.links.websocket import WebSocketLink
from gateway.links.xiaozhi.emotions import EmotionTable
from gateway.links.xiaozhi.endpoint import XiaozhiEndpoint
from gateway.screens.server import ScreensServer
from tests.conftest import ROOT
from tests.console.conftest import PASSWORD, Client
from tests.links.xiaozhi.box import XiaozhiBox

OTA = "/xiaozhi/ota/"
HISTORY_TOKENS = 60


@dataclass
class Member:
    gateway: Gateway
    http: str  # http://127.0.0.1:PORT of the device WebSocket link (xiaozhi OTA there too)
    console: str  # 127.0.0.1:PORT of the screens server that mounts the console

    async def admin(self) -> Client:
        client = Client(self.console)
        assert (await client.login()).status == 200
        return client

    async def ask(self, device_id: str, utterance: str) -> list[str]:
        session = self.gateway.brain.session(device_id)
        return [s.speech async for s in session.reply(utterance, BrainContext(device_id, datetime(2026, 12, 1, tzinfo=UTC)))]


def _config(tmp: Path, backend: str, llm_url: str) -> dict:
    return {"server": {"host": "127.0.0.1", "hello_timeout_s": 2},
            "storage": {"backend": backend, "connect_timeout_s": 3},
            "devices": {"database": str(tmp / "gateway.db"), "open_enrolment": False},
            "mqtt": {"enabled": False}, "coap": {"enabled": False},
            "console": {"password_file": str(tmp / "console-password")},
            "memory": {"enabled": False},
            "brain": {"route": "llm_first", "history_tokens": HISTORY_TOKENS,
                      "providers": [{"name": "scripted", "base_url": llm_url, "model": "scripted"}]}}


async def _start(tmp: Path, backend: str, llm_url: str, fake_runner) -> tuple[Member, asyncio.Task]:
    tmp.mkdir()
    cfg = parse_config(_config(tmp, backend, llm_url), ROOT)
    PasswordFile(cfg.path(cfg.console.password_file)).set(PASSWORD)
    s = cfg.server
    endpoint = XiaozhiEndpoint.from_config(cfg.xiaozhi, EmotionTable.load(cfg.path(cfg.xiaozhi.emotions)), s.max_frame_bytes)
    link = WebSocketLink("127.0.0.1", 0, s.websocket_path, s.max_frame_bytes, [endpoint])
    screens = ScreensServer("127.0.0.1", 0, "/screen", key="shared-state-test-key")
    gateway = build_gateway(cfg, fake_runner, lambda line: None, links=[link, screens])
    ready = asyncio.Event()
    task = asyncio.create_task(gateway.serve(ready))
    waiting = asyncio.create_task(ready.wait())
    await asyncio.wait([waiting, task], timeout=60, return_when=asyncio.FIRST_COMPLETED)
    if not ready.is_set():
        waiting.cancel()
        raise RuntimeError(f"the gateway did not start: {task.exception() if task.done() else 'not ready in 60 s'}")
    return Member(gateway, f"http://127.0.0.1:{link.port}", f"127.0.0.1:{screens.port}"), task


@pytest_asyncio.fixture(params=["sqlite", "postgres"])
async def pair(request, tmp_path: Path, fake_runner, monkeypatch) -> AsyncIterator[tuple[Member, Member, ScriptedLlm]]:
    """(a, b, the LLM both ask): two gateways on one PostgreSQL, or the single box twice."""
    backend = request.param
    if backend == "postgres":
        monkeypatch.setenv("GATEWAY_PG_DSN", request.getfixturevalue("postgres_dsn"))
    async with ScriptedLlm([Script([f"Reply {i}."]) for i in range(40)]) as llm:
        a, task_a = await _start(tmp_path / "a", backend, llm.url, fake_runner)
        tasks = [task_a]
        try:
            if backend == "postgres":
                b, task_b = await _start(tmp_path / "b", backend, llm.url, fake_runner)
                tasks.append(task_b)
            else:
                b = a
            yield a, b, llm
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)


def _dialogue(request: dict) -> list[tuple[str, str]]:
    return [(m["role"], m["content"]) for m in request["messages"] if m["role"] in ("user", "assistant")]


async def test_a_conversation_goes_on_on_the_other_gateway_with_only_what_was_played(pair) -> None:
    a, b, llm = pair
    assert await a.ask("kitchen", "my favourite colour is teal") == ["Reply 0."]
    await a.gateway.brain.drain()  # its write is queued off the turn's path (a failover takes seconds)
    assert await b.ask("kitchen", "what is my favourite colour") == ["Reply 1."]
    assert _dialogue(llm.requests[1]) == [("user", "my favourite colour is teal"), ("assistant", "Reply 0."),
                                          ("user", "what is my favourite colour")]
    # a barge-in on b: the history keeps what was played, on every gateway
    session = b.gateway.brain.session("kitchen")
    ctx = BrainContext("kitchen", datetime(2026, 12, 1, tzinfo=UTC), reports_playback=True)
    assert [s.speech async for s in session.reply("tell me a story", ctx)] == ["Reply 2."]
    session.spoken("Rep")
    await b.gateway.brain.drain()
    await a.ask("kitchen", "go on")
    assert _dialogue(llm.requests[3])[-3:] == [("user", "tell me a story"), ("assistant", "Rep"), ("user", "go on")]
    assert await a.ask("garage", "hello") == ["Reply 4."]  # another device, nobody mapped: its own history
    assert _dialogue(llm.requests[4]) == [("user", "hello")]


async def test_the_shared_history_is_bounded_like_the_ram_one(pair, request) -> None:
    a, b, llm = pair
    for i in range(10):
        member = a if i % 2 == 0 else b
        await member.ask("kitchen", f"this is question number {i} of a long talk")
        await member.gateway.brain.drain()
    await a.ask("kitchen", "the last one")
    sent = _dialogue(llm.requests[-1])[:-1]  # the history the request carried, this turn's question left out
    kept = a.gateway.brain.history("kitchen").messages()
    assert 2 <= len(sent) < 20 and sent[-2] == ("user", "this is question number 9 of a long talk")
    if "postgres" in request.node.callspec.id:
        await a.gateway.brain.drain()
        with psycopg.connect(request.getfixturevalue("postgres_dsn")) as conn:
            rows = conn.execute("SELECT user_text FROM conversation_turns WHERE history_key = 'device:kitchen'"
                                " ORDER BY seq").fetchall()
        assert [r[0] for r in rows] == [m["content"] for m in kept if m["role"] == "user"]  # trimmed alike


async def _until(check, timeout: float = 10 * FOLLOW_S) -> None:
    async with asyncio.timeout(timeout):
        while not check():
            await asyncio.sleep(0.1)


async def test_a_person_set_on_one_console_holds_on_the_other_gateway(pair) -> None:
    a, b, llm = pair
    admin_a, admin_b = await a.admin(), await b.admin()
    for device in ("kitchen", "bedroom"):
        answer = await admin_a.request("POST", "/console/api/devices/person", {"device_id": device, "person": "anna"})
        assert answer.status == 200 and answer.json()["person_source"] == "console"
    await _until(lambda: b.gateway.people.get("bedroom") == "anna")
    assert b.gateway.people.source("bedroom") == "console"
    await a.ask("kitchen", "my name is anna")
    await a.gateway.brain.drain()
    await b.ask("bedroom", "what is my name")  # another device of hers, on the other gateway: her conversation
    assert _dialogue(llm.requests[1])[:2] == [("user", "my name is anna"), ("assistant", "Reply 0.")]

    answer = await admin_b.request("POST", "/console/api/devices/person", {"device_id": "bedroom", "person": None})
    assert answer.status == 200 and answer.json()["person_source"] == "own"
    await _until(lambda: "bedroom" not in a.gateway.people)
    assert a.gateway.people.source("bedroom") == "own" and a.gateway.people["kitchen"] == "anna"


async def test_a_box_given_its_code_by_one_gateway_is_approved_and_served_by_the_other(pair, request) -> None:
    a, b, _ = pair
    box = XiaozhiBox(mac="a0:b1:c2:5e:00:17")
    status, reply = await box.ota(a.http + OTA)
    assert status == 200 and "websocket" not in reply
    code = reply["activation"]["code"]
    assert (await box.ota(b.http + OTA))[1]["activation"]["code"] == code  # asked the other: the same code
    admin_b = await b.admin()
    listed = (await admin_b.request("GET", "/console/api/devices")).json()["pending"]
    assert [(p["device_id"], p["code"]) for p in listed] == [("xiaozhi-a0b1c25e0017", code)]
    assert await box.activate(a.http + OTA) == 202
    answer = await admin_b.request("POST", "/console/api/devices/approve", {"code": code})
    assert answer.status == 200 and answer.json()["approved"] == "xiaozhi-a0b1c25e0017"
    assert await box.activate(a.http + OTA) == 200  # approved on b, seen on a
    status, reply = await box.ota(a.http + OTA)  # a hands the token over, once
    assert "activation" not in reply and len(reply["websocket"]["token"]) >= 24
    assert (await admin_b.request("GET", "/console/api/devices")).json()["pending"] == []
    for member in (a, b):  # the box's token is good on both
        box.ws_url = member.http.replace("http://", "ws://") + box.ws_url[box.ws_url.index("/", len("ws://")):]
        hello = await box.open()
        assert hello["type"] == "hello" and hello["session_id"]
        await box.close()
    if "postgres" in request.node.callspec.id:
        with psycopg.connect(request.getfixturevalue("postgres_dsn")) as conn:
            assert conn.execute("SELECT device_id FROM devices").fetchall() == [("xiaozhi-a0b1c25e0017",)]
            assert conn.execute("SELECT count(*) FROM activations").fetchone()[0] == 0


async def test_a_reading_stored_through_one_gateway_is_listed_charted_and_exported_by_the_others_console(pair) -> None:
    a, b, _ = pair
    pg = a.gateway.postgres
    token = await (pg.devices if pg is not None else SqliteDeviceRegistry(a.gateway.db)).add_device("bp-1")
    url = a.http.replace("http://", "ws://") + a.gateway.cfg.server.websocket_path
    async with connect(url) as ws:
        await ws.send(encode(Hello(device_id="bp-1", token=token)))
        assert isinstance(decode(await asyncio.wait_for(ws.recv(), 10)), Welcome)
        await ws.send(encode(SensorReading(1, "blood_pressure", 0, (("systolic", "mmHg", 151.0), ("diastolic", "mmHg", 95.0)))))
        ack = decode(await asyncio.wait_for(ws.recv(), 10))
    assert isinstance(ack, ReadingAck) and ack.status == ReadingStatus.STORED
    admin_b = await b.admin()
    listed = (await admin_b.request("GET", "/console/api/readings?days=1")).json()
    assert [(r["device_id"], r["kind"], r["values"]) for r in listed["readings"]] == [
        ("bp-1", "blood_pressure", {"systolic": 151.0, "diastolic": 95.0})]
    assert listed["kinds"] == ["blood_pressure"] and "device.bp-1" in listed["people"]
    exported = await admin_b.request("GET", "/console/api/readings.csv?days=1&kind=blood_pressure")
    rows = list(csv.reader(io.StringIO(exported.body.decode())))
    assert [r[2:7] for r in rows[1:]] == [["bp-1", "device.bp-1", "blood_pressure", "systolic", "151.0"],
                                          ["bp-1", "device.bp-1", "blood_pressure", "diastolic", "95.0"]]



async def _hello(member: Member, device_id: str, token: str) -> bool:
    async with connect(member.http.replace("http://", "ws://") + member.gateway.cfg.server.websocket_path) as ws:
        await ws.send(encode(Hello(device_id=device_id, token=token)))
        return isinstance(decode(await asyncio.wait_for(ws.recv(), 10)), Welcome)


async def test_a_device_added_on_one_console_is_listed_renamed_and_removed_on_the_other(pair) -> None:
    a, b, _ = pair
    admin_a, admin_b = await a.admin(), await b.admin()
    added = await admin_a.request("POST", "/console/api/devices/add", {"device_id": "hall-box", "name": "hall"})
    assert added.status == 200
    token = added.json()["token"]
    assert await _hello(b, "hall-box", token)  # registered through a, welcomed by b
    listed = (await admin_b.request("GET", "/console/api/devices")).json()["registered"]
    assert [(d["device_id"], d["name"]) for d in listed] == [("hall-box", "hall")] and listed[0]["last_seen"]
    assert (await admin_b.request("POST", "/console/api/devices/rename", {"device_id": "hall-box", "name": "porch"})).status == 200
    assert [d["name"] for d in (await admin_a.request("GET", "/console/api/devices")).json()["registered"]] == ["porch"]
    assert (await admin_a.request("POST", "/console/api/devices/remove", {"device_id": "hall-box"})).status == 200
    assert not await _hello(b, "hall-box", token)  # removed through a: b refuses it
    assert (await admin_b.request("POST", "/console/api/devices/remove", {"device_id": "hall-box"})).status == 404


async def test_with_postgres_down_a_turn_goes_on_with_the_gateways_own_history_and_says_why(
        tmp_path: Path, fake_runner, monkeypatch, postgres_dsn, postgres_server, caplog) -> None:
    monkeypatch.setenv("GATEWAY_PG_DSN", postgres_dsn)
    async with ScriptedLlm([Script([f"Reply {i}."]) for i in range(4)]) as llm:
        a, task = await _start(tmp_path / "a", "postgres", llm.url, fake_runner)
        try:
            await a.ask("kitchen", "my favourite colour is teal")
            await a.gateway.brain.drain()
            postgres_server.stop("immediate")
            try:
                with caplog.at_level("WARNING", logger="gateway.brain"):
                    assert await a.ask("kitchen", "what is my favourite colour") == ["Reply 1."]
                    await a.gateway.brain.drain()
            finally:
                postgres_server.start()
            assert _dialogue(llm.requests[1])[:2] == [("user", "my favourite colour is teal"), ("assistant", "Reply 0.")]
            said = caplog.text
            assert "the shared history of device:kitchen not read" in said and "this gateway's own is used" in said
            assert "turn of device:kitchen not saved" in said
            assert await a.ask("kitchen", "and now") == ["Reply 2."]  # PostgreSQL back: its history again
            assert _dialogue(llm.requests[2])[:2] == [("user", "my favourite colour is teal"), ("assistant", "Reply 0.")]
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
