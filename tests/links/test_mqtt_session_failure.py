"""One device session failing inside the gateway (its database locked, a PostgreSQL error) ends
that session alone: the MQTT link, which runs every session in its own TaskGroup, and the devices
already welcomed go on. Real mosquitto, the real MqttLink and sessions, fake engines."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from dataclasses import replace
from functools import partial
from pathlib import Path

import psycopg
import pytest

from firmware_protocol import Error, Hello, Ping, Pong, ReadingAck, ReadingStatus, SensorReading, Welcome
from gateway.app import Gateway
from gateway.config import parse_config
from gateway.devices.auth import Authenticator, add_device
from gateway.devices.session import serve_device
from gateway.links.mqtt import MqttLink
from gateway.links.mqtt_device import MqttDevice

pytestmark = pytest.mark.asyncio(loop_scope="session")
ROOT = Path(__file__).resolve().parents[2]
HUMID = (("percent", "%", 45.0),)


async def recv(dev: MqttDevice, timeout: float = 10):
    return await asyncio.wait_for(dev.receive(), timeout)


def closed_gateway(runner, tmp_path: Path, links: list[MqttLink]) -> Gateway:
    cfg = parse_config({"server": {"hello_timeout_s": 5},
                        "devices": {"database": str(tmp_path / "g.db"), "open_enrolment": False}}, ROOT)
    return Gateway(cfg, runner, links)


async def welcomed(device_id: str, token: str, port: int) -> MqttDevice:
    dev = MqttDevice(device_id, token)
    await dev.connect("127.0.0.1", port)
    await dev.send(Hello(device_id=device_id, token=token))
    assert isinstance(await recv(dev), Welcome)
    return dev


async def stop(task: asyncio.Task) -> None:
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def test_a_hello_on_a_locked_database_is_refused_with_storage_failed_and_the_others_are_still_served(
        mosquitto, fake_runner, tmp_path, caplog):
    link = MqttLink("127.0.0.1", mosquitto.port)
    gateway = closed_gateway(fake_runner, tmp_path, [link])
    token_a = await gateway.db.run(add_device, "locked-a", "")
    token_b = await gateway.db.run(add_device, "locked-b", "")
    # the gateway's writer waits 0.2 s for a lock, not its 10 s: the test need not wait that long
    await gateway.db.run(lambda conn: conn.execute("PRAGMA busy_timeout=200"))
    ready = asyncio.Event()
    serving = asyncio.create_task(gateway.serve(ready))
    other = sqlite3.connect(gateway.db.path, isolation_level=None)  # a `sqlite3` shell, a backup tool...
    a = b = None
    try:
        await asyncio.wait_for(ready.wait(), 10)
        await asyncio.wait_for(link.connected.wait(), 10)
        a = await welcomed("locked-a", token_a, mosquitto.port)

        other.execute("BEGIN IMMEDIATE")  # holds the write lock: UPDATE devices SET last_seen fails
        b = MqttDevice("locked-b", token_b)
        await b.connect("127.0.0.1", mosquitto.port)
        with caplog.at_level(logging.WARNING, logger="gateway.devices.session"):
            await b.send(Hello(device_id="locked-b", token=token_b))
            refused = await recv(b)
        assert isinstance(refused, Error) and refused.code == "storage-failed", refused
        assert "database is locked" in refused.text
        assert "(locked-b): storage-failed:" in caplog.text
        other.execute("ROLLBACK")

        assert not serving.done(), serving
        await a.send(SensorReading(1, "humidity", 0, HUMID))  # the device welcomed before is still served
        ack = await recv(a)
        assert isinstance(ack, ReadingAck) and ack.status == ReadingStatus.STORED, ack
        await b.send(Hello(device_id="locked-b", token=token_b))  # the refused one, later, gets in
        assert isinstance(await recv(b), Welcome)
    finally:
        other.close()
        for dev in (a, b):
            if dev is not None:
                await dev.close()
        await stop(serving)


class PostgresGone:
    """The device registry of a cluster whose PostgreSQL went away for one device's Hello."""

    def __init__(self, failing: str) -> None:
        self.failing = failing

    async def check_token(self, device_id: str, token: str) -> bool | None:
        if device_id == self.failing:
            raise psycopg.OperationalError("consuming input failed: server closed the connection unexpectedly")
        return True


async def test_an_unexpected_error_in_one_session_ends_it_with_internal_error_and_the_link_goes_on(
        mosquitto, fake_runner, tmp_path, caplog):
    gateway = closed_gateway(fake_runner, tmp_path, [])  # its services; the link is served here, alone
    services = replace(gateway.services, auth=Authenticator(PostgresGone("doomed"), open_enrolment=False))
    link = MqttLink("127.0.0.1", mosquitto.port)
    ready = asyncio.Event()
    serving = asyncio.create_task(link.serve(partial(serve_device, services=services), ready))
    a = b = None
    try:
        await asyncio.wait_for(ready.wait(), 10)
        await asyncio.wait_for(link.connected.wait(), 10)
        a = await welcomed("healthy", "any", mosquitto.port)

        b = MqttDevice("doomed", "any")
        await b.connect("127.0.0.1", mosquitto.port)
        with caplog.at_level(logging.ERROR, logger="gateway.devices.session"):
            await b.send(Hello(device_id="doomed", token="any"))
            failed = await recv(b)
        assert isinstance(failed, Error) and failed.code == "internal-error", failed
        line = next(r for r in caplog.records if r.name == "gateway.devices.session" and r.levelno == logging.ERROR)
        assert "(doomed): internal-error" in line.getMessage() and "server closed the connection" in caplog.text
        assert line.exc_info is not None  # the traceback, once

        assert not serving.done(), serving
        await a.send(Ping(nonce=7))
        assert await recv(a) == Pong(nonce=7)
        await a.send(SensorReading(1, "humidity", 0, HUMID))
        ack = await recv(a)
        assert isinstance(ack, ReadingAck) and ack.status == ReadingStatus.STORED, ack
    finally:
        for dev in (a, b):
            if dev is not None:
                await dev.close()
        await stop(serving)
