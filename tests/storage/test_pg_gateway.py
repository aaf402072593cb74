"""`storage: postgres` at the composition root: `gateway devices add` registers a device on
PostgreSQL; the gateway build_gateway composes (as `gateway run` does, its WebSocket link on a
real socket) welcomes it, acks its reading once it is committed in PostgreSQL, and the memory
(on PostgreSQL too) remembers it; an unreachable database stops start-up with one line naming
the DSN's variable."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from websockets.asyncio.client import connect

from firmware_protocol import Hello, ReadingAck, ReadingStatus, SensorReading, Welcome, decode, encode
from gateway.app import build_gateway
from gateway.config import ConfigError, parse_config
from gateway.links.memory import MemoryLink
from tests.conftest import ROOT


def _config(tmp_path: Path, memory: bool) -> dict:
    return {"server": {"host": "127.0.0.1", "websocket_port": 0, "hello_timeout_s": 2}, "storage": {"backend": "postgres", "connect_timeout_s": 3},
            "devices": {"database": str(tmp_path / "gateway.db"), "open_enrolment": False},
            "mqtt": {"enabled": False}, "coap": {"enabled": False}, "screens": {"enabled": False},
            "xiaozhi": {"enabled": False},
            "memory": {"enabled": memory, "path": str(tmp_path / "memory.db"), "users": {"bp-pg": "anna"}}}


def _devices_add(tmp_path: Path, dsn: str, device: str) -> str:
    """`gateway devices add DEVICE` on the config: its token (from the printed credentials)."""
    config = tmp_path / "gateway.yaml"
    config.write_text(json.dumps(_config(tmp_path, memory=False)))  # JSON is YAML
    done = subprocess.run([sys.executable, "-m", "gateway", "--config", str(config), "devices", "add", device],
                          capture_output=True, text=True, timeout=60, cwd=ROOT,
                          env={**os.environ, "GATEWAY_PG_DSN": dsn})
    assert done.returncode == 0, done.stderr
    [line] = [x for x in done.stdout.splitlines() if x.strip().startswith("token:")]
    return line.split(":", 1)[1].strip()


async def test_a_device_added_on_postgres_logs_in_and_its_acked_reading_is_in_postgres_and_in_the_memory(
        tmp_path: Path, postgres_dsn: str, fake_runner, monkeypatch) -> None:
    token = _devices_add(tmp_path, postgres_dsn, "bp-pg")
    with psycopg.connect(postgres_dsn) as conn:  # the CLI wrote PostgreSQL's registry
        assert conn.execute("SELECT device_id FROM devices").fetchall() == [("bp-pg",)]
    monkeypatch.setenv("GATEWAY_PG_DSN", postgres_dsn)
    cfg = parse_config(_config(tmp_path, memory=True), ROOT)
    gateway = build_gateway(cfg, fake_runner, lambda line: None)  # the links gateway run serves: the WebSocket
    [link] = gateway.links
    ready = asyncio.Event()
    task = asyncio.create_task(gateway.serve(ready))
    try:
        await asyncio.wait_for(ready.wait(), 60)
        url = f"ws://127.0.0.1:{link.port}{cfg.server.websocket_path}"
        async with connect(url) as ws:
            await ws.send(encode(Hello(device_id="bp-pg", token=token)))
            assert isinstance(decode(await asyncio.wait_for(ws.recv(), 10)), Welcome)
            await ws.send(encode(SensorReading(5, "blood_pressure", 0,
                                               (("systolic", "mmHg", 151.0), ("diastolic", "mmHg", 95.0)))))
            ack = decode(await asyncio.wait_for(ws.recv(), 10))
        assert isinstance(ack, ReadingAck) and (ack.seq, ack.status) == (5, ReadingStatus.STORED)
        with psycopg.connect(postgres_dsn) as conn:  # committed before the ack
            assert conn.execute("SELECT device_id, seq, kind FROM readings").fetchall() == [("bp-pg", 5, "blood_pressure")]
        async with asyncio.timeout(30):  # the feed reads PostgreSQL's readings in (xid, id) order
            while not (nodes := await gateway.memory.recent("anna", 10, any_of=["reading:*"])):
                await asyncio.sleep(0.2)
        [node] = nodes
        assert "blood pressure 151 over 95 mmHg" in node.content and "source:bp-pg" in node.tags
        with psycopg.connect(postgres_dsn) as conn:  # the memory is PostgreSQL's, its cursor moved with it
            assert conn.execute("SELECT count(*) FROM nodes WHERE user_id = 'anna'").fetchone()[0] == 1
            [(reading_id,)] = conn.execute("SELECT id FROM readings").fetchall()
            assert conn.execute("SELECT position FROM feed_cursors WHERE name = 'readings'").fetchone()[0] == reading_id
        async with connect(url) as ws:  # a wrong token is refused by PostgreSQL's registry
            await ws.send(encode(Hello(device_id="bp-pg", token=token + "x")))
            assert not isinstance(decode(await asyncio.wait_for(ws.recv(), 10)), Welcome)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert not (tmp_path / "gateway.db").exists() or _sqlite_readings(tmp_path / "gateway.db") == 0


def _sqlite_readings(path: Path) -> int:
    import sqlite3
    with sqlite3.connect(path) as conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        return conn.execute("SELECT count(*) FROM readings").fetchone()[0] if "readings" in tables else 0


async def test_an_unreachable_postgres_stops_start_up_with_one_line_naming_the_variable(
        tmp_path: Path, fake_runner, monkeypatch) -> None:
    monkeypatch.setenv("GATEWAY_PG_DSN", "postgresql://gateway@127.0.0.1:1/gateway")  # nothing listens on port 1
    cfg = parse_config(_config(tmp_path, memory=False), ROOT)
    gateway = build_gateway(cfg, fake_runner, lambda line: None, links=[MemoryLink()])
    with pytest.raises(ConfigError) as failed:
        await asyncio.wait_for(gateway.serve(asyncio.Event()), 30)
    text = str(failed.value)
    assert "$GATEWAY_PG_DSN" in text and "storage.dsn_env" in text and "\n" not in text


def test_postgres_without_its_dsn_variable_is_refused_before_start(tmp_path: Path, fake_runner, monkeypatch) -> None:
    monkeypatch.delenv("GATEWAY_PG_DSN", raising=False)
    with pytest.raises(ConfigError, match="GATEWAY_PG_DSN"):
        build_gateway(parse_config(_config(tmp_path, memory=False), ROOT), fake_runner, lambda line: None,
                      links=[MemoryLink()])


async def _send_reading(gateway, token: str, seq: int) -> None:
    [link] = gateway.links
    async with connect(f"ws://127.0.0.1:{link.port}{gateway.cfg.server.websocket_path}") as ws:
        await ws.send(encode(Hello(device_id="bp-pg", token=token)))
        assert isinstance(decode(await asyncio.wait_for(ws.recv(), 10)), Welcome)
        await ws.send(encode(SensorReading(seq, "blood_pressure", 0, (("systolic", "mmHg", 120.0 + seq),
                                                                     ("diastolic", "mmHg", 80.0)))))
        ack = decode(await asyncio.wait_for(ws.recv(), 10))
    assert isinstance(ack, ReadingAck) and ack.status == ReadingStatus.STORED


def _nodes(dsn: str) -> list[str]:
    """The readings' memory nodes (`kind:event`), not the daily reflection's insight on them, which
    inherits their tags: after `memory.reflection_time` (23:00) a gateway taking over the job writes it."""
    with psycopg.connect(dsn) as conn:
        return [r[0] for r in conn.execute(
            "SELECT content FROM nodes WHERE tags LIKE '%%reading:%%' AND tags LIKE '%%kind:event%%' ORDER BY id")]


async def _until(check, timeout: float = 30) -> None:
    async with asyncio.timeout(timeout):
        while not check():
            await asyncio.sleep(0.2)


async def test_two_gateways_on_one_postgres_feed_each_reading_into_the_memory_once_and_the_second_takes_over(
        tmp_path: Path, postgres_dsn: str, fake_runner, monkeypatch) -> None:
    token = _devices_add(tmp_path, postgres_dsn, "bp-pg")
    monkeypatch.setenv("GATEWAY_PG_DSN", postgres_dsn)
    gateways, tasks = [], []
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        gateway = build_gateway(parse_config(_config(tmp_path / name, memory=True), ROOT), fake_runner, lambda line: None)
        ready = asyncio.Event()
        tasks.append(asyncio.create_task(gateway.serve(ready)))
        await asyncio.wait_for(ready.wait(), 60)
        gateways.append(gateway)
        if name == "a":  # a takes the feed lock first
            await _until(lambda: gateways[0].postgres.feed_job.leading)
    a, b = gateways
    try:
        await _send_reading(a, token, 1)
        await _send_reading(b, token, 2)  # stored by b, fed by a (no event on a's bus: a polls)
        await _until(lambda: len(_nodes(postgres_dsn)) >= 2)
        assert not b.postgres.feed_job.leading
        tasks[0].cancel()  # a stops: its lock's connection closes
        await asyncio.gather(tasks[0], return_exceptions=True)
        await _until(lambda: b.postgres.feed_job.leading, timeout=30)
        await _send_reading(b, token, 3)
        await _until(lambda: len(_nodes(postgres_dsn)) >= 3)
        await asyncio.sleep(2)  # a second feed would have written its duplicates by now
        contents = _nodes(postgres_dsn)
        assert [c.split(" mmHg")[0] for c in contents] == [f"blood pressure {120 + s} over 80" for s in (1, 2, 3)]
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
