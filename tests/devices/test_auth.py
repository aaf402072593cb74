"""Device registry and Hello authentication; readings through a real session (in-memory link)."""

from __future__ import annotations

import asyncio
import json
import logging
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from firmware_protocol import Error, Hello, ReadingAck, ReadingStatus, SensorReading, Welcome
from gateway.app import Gateway
from gateway.config import GatewayConfig, parse_config
from gateway.devices.auth import add_device, check_token, get_device, list_devices, remove_device
from gateway.devices.database import connect
from gateway.devices.readings import ReadingStored, insert_reading
from gateway.links.base import LinkClosed
from gateway.links.memory import MemoryLink

ROOT = Path(__file__).resolve().parents[2]


def test_a_registered_device_has_a_token_that_is_checked_and_stored_only_hashed(tmp_path):
    conn = connect(tmp_path / "g.db")
    token = add_device(conn, "box-1", "kitchen")
    assert len(token) >= 32
    assert check_token(conn, "box-1", token) is True
    assert check_token(conn, "box-1", token + "x") is False
    assert check_token(conn, "nobody", token) is None
    assert token not in str(conn.execute("SELECT * FROM devices").fetchall())
    assert get_device(conn, "box-1").last_seen is not None
    new_token = add_device(conn, "box-1", "kitchen")  # re-adding issues a new token
    assert check_token(conn, "box-1", token) is False and check_token(conn, "box-1", new_token) is True
    assert [d.device_id for d in list_devices(conn)] == ["box-1"]
    assert remove_device(conn, "box-1") and not remove_device(conn, "box-1")


@pytest.fixture(scope="module")
def closed_cfg(tmp_path_factory) -> GatewayConfig:
    db = tmp_path_factory.mktemp("auth") / "gateway.db"
    return parse_config({"server": {"hello_timeout_s": 2}, "devices": {"database": str(db), "open_enrolment": False}}, ROOT)


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def closed_gateway(closed_cfg, fake_runner) -> AsyncIterator[tuple[Gateway, MemoryLink]]:
    link = MemoryLink()
    gateway = Gateway(closed_cfg, fake_runner, [link])
    ready = asyncio.Event()
    task = asyncio.create_task(gateway.serve(ready))
    await asyncio.wait_for(ready.wait(), 10)
    yield gateway, link
    task.cancel()



async def _first_reply(dev, timeout: float = 5):
    return await asyncio.wait_for(dev.receive(), timeout)


@pytest.mark.asyncio(loop_scope="session")
async def test_a_registered_device_with_its_token_is_welcomed_and_its_reading_is_stored(closed_gateway, closed_cfg):
    gateway, link = closed_gateway
    token = await gateway.db.run(add_device, "bp-ok", "")
    sub = gateway.bus.subscribe(ReadingStored)
    dev = link.connect()
    await dev.send(Hello(device_id="bp-ok", token=token))
    assert isinstance(await _first_reply(dev), Welcome)
    values = (("systolic", "mmHg", 118.0), ("diastolic", "mmHg", 76.0))
    await dev.send(SensorReading(1, "blood_pressure", 0, values))
    ack = await _first_reply(dev)
    assert isinstance(ack, ReadingAck) and (ack.seq, ack.status) == (1, ReadingStatus.STORED)
    event = await asyncio.wait_for(sub.get(), 2)
    assert event.device_id == "bp-ok" and event.values == {"systolic": 118.0, "diastolic": 76.0}
    await dev.send(SensorReading(1, "blood_pressure", 0, values))  # a resend after a lost ack
    assert (await _first_reply(dev)).status == ReadingStatus.DUPLICATE
    await dev.send(SensorReading(2, "blood_pressure", 0, (("systolic", "mmHg", 500.0), ("diastolic", "mmHg", 76.0))))
    bad = await _first_reply(dev)
    assert (bad.status, bad.code) == (ReadingStatus.REJECTED, "reading-invalid")
    await dev.close()
    sub.close()


@pytest.mark.asyncio(loop_scope="session")
@pytest.mark.parametrize(("device_id", "register", "reason"), [
    ("bp-wrong-token", True, "wrong token for device bp-wrong-token"),
    ("stranger", False, "unknown device stranger"),
])
async def test_a_wrong_token_or_an_unknown_device_is_refused_with_auth_failed_and_logged(
    closed_gateway, caplog, device_id, register, reason
):
    gateway, link = closed_gateway
    if register:
        await gateway.db.run(add_device, device_id, "")
    dev = link.connect()
    with caplog.at_level(logging.WARNING):
        await dev.send(Hello(device_id=device_id, token="not-the-token"))
        err = await _first_reply(dev)
        assert isinstance(err, Error) and err.code == "auth-failed" and reason in err.text
        with pytest.raises(LinkClosed):
            await _first_reply(dev)  # the gateway closed the connection
    assert f"({device_id}): auth-failed: {reason}" in caplog.text


def _gateway_cli(*args: str, config: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gateway", *args, "--config", str(config)],
                          capture_output=True, text=True, timeout=60)


def test_gateway_devices_add_prints_credentials_and_list_show_remove_and_readings_work(tmp_path):
    config = tmp_path / "gateway.yaml"
    config.write_text("devices:\n  database: gw.db\n  open_enrolment: false\n")
    added = _gateway_cli("devices", "add", "bp-7", "--name", "bedroom monitor", config=config)
    assert added.returncode == 0, added.stderr
    token = added.stdout.split("token:", 1)[1].split()[0]
    assert f'#define GATEWAY_TOKEN      "{token}"' in added.stdout
    conn = connect(tmp_path / "gw.db")
    assert check_token(conn, "bp-7", token) is True
    conn.close()
    listed = _gateway_cli("devices", "list", config=config)
    assert "bp-7" in listed.stdout and "bedroom monitor" in listed.stdout
    assert "last seen:" in _gateway_cli("devices", "show", "bp-7", config=config).stdout
    assert _gateway_cli("devices", "remove", "bp-7", config=config).returncode == 0
    missing = _gateway_cli("devices", "show", "bp-7", config=config)
    assert missing.returncode == 1 and "no device bp-7" in missing.stderr
    assert _gateway_cli("devices", "add", "bad id", config=config).returncode == 2
    assert "no readings stored yet" in _gateway_cli("readings", config=config).stdout
    conn = connect(tmp_path / "gw.db")
    insert_reading(conn, "bp-7", SensorReading(1, "blood_pressure", 1764547200,
                                              (("systolic", "mmHg", 121.0), ("diastolic", "mmHg", 79.0))), 1764547260.0)
    conn.close()
    listed = _gateway_cli("readings", "--device", "bp-7", config=config).stdout
    assert "2025-12-01T00:00:00+00:00  bp-7  blood_pressure: systolic 121 mmHg, diastolic 79 mmHg" in listed
    [row] = [json.loads(line) for line in _gateway_cli("readings", "--json", config=config).stdout.splitlines()]
    assert row["values"] == {"systolic": 121.0, "diastolic": 79.0} and row["clock"] == "device"
