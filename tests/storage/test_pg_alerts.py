"""Alerts across the gateways of one PostgreSQL: the rule fires on the member running the readings
feed, and the person's voice box connected to another member says it (LISTEN/NOTIFY,
gateway/storage/alert_relay.py), once; members starting together write the config's rules once."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import psycopg

from firmware_protocol import Hello, ReplyText, SensorReading, Welcome
from gateway.app import build_gateway
from gateway.cluster.events import ClusterEvents
from gateway.config import parse_config
from gateway.links.memory import MemoryLink
from gateway.memory.events import Alert
from gateway.storage.alert_relay import decode_alert, encode_alert
from tests.conftest import ROOT
from tests.memory.conftest import until

RULE = "Blood pressure above 140/90: tell Anna to rest"


def _config(tmp_path: Path) -> dict:
    return {"server": {"hello_timeout_s": 2}, "storage": {"backend": "postgres", "connect_timeout_s": 3},
            "devices": {"database": str(tmp_path / "gateway.db"), "open_enrolment": True},
            "mqtt": {"enabled": False}, "coap": {"enabled": False}, "screens": {"enabled": False},
            "xiaozhi": {"enabled": False},
            "memory": {"enabled": True, "path": str(tmp_path / "memory.db"),
                       "users": {"bp-anna": "anna", "box-anna": "anna"},
                       "rules": [{"user": "anna", "text": RULE, "reading": "blood_pressure", "above": "140/90"}]}}


def test_an_alert_survives_the_trip_through_notify_and_is_not_sent_on_the_broker_too() -> None:
    alert = Alert("anna", ("box-anna", "bp-anna"), "Rest now. The reading: 161 over 99 mmHg.", 12, "warning", 1.5)
    assert decode_alert(encode_alert(alert)) == alert
    # every member's bus has it from PostgreSQL: the cluster's screen events would show it twice
    assert ClusterEvents("gw-a", "gw").outgoing(alert) is None


async def _spoken(box, timeout: float) -> list[str]:
    said = []
    try:
        async with asyncio.timeout(timeout):
            while True:
                said.append((await until(box, ReplyText, timeout)).text)
    except TimeoutError:
        return said


async def test_the_alert_raised_by_the_feeding_member_is_said_by_the_box_on_the_other_member_once(
        tmp_path: Path, postgres_dsn: str, fake_runner, monkeypatch) -> None:
    monkeypatch.setenv("GATEWAY_PG_DSN", postgres_dsn)
    gateways, links, tasks = [], [], []
    try:
        for name in ("a", "b"):  # started together: the rule of the config is written once
            (tmp_path / name).mkdir()
            link = MemoryLink()
            gateway = build_gateway(parse_config(_config(tmp_path / name), ROOT), fake_runner, lambda line: None,
                                    links=[link])
            gateways.append(gateway)
            links.append(link)
        readies = [asyncio.Event() for _ in gateways]
        tasks = [asyncio.create_task(g.serve(r)) for g, r in zip(gateways, readies)]
        await asyncio.wait_for(asyncio.gather(*(r.wait() for r in readies)), 60)
        async with asyncio.timeout(30):
            while not any(g.postgres.feed_job.leading for g in gateways) or not all(
                    g.postgres.alert_relay.listening for g in gateways):
                await asyncio.sleep(0.1)
        with psycopg.connect(postgres_dsn) as conn:
            assert conn.execute("SELECT count(*) FROM nodes WHERE content = %s", (RULE,)).fetchone() == (1,)
        feeding = next(i for i, g in enumerate(gateways) if g.postgres.feed_job.leading)
        other = 1 - feeding
        box = links[other].connect()  # anna's voice box is served by the member that does not feed
        await box.send(Hello(device_id="box-anna"))
        await until(box, Welcome)
        cuff = links[feeding].connect()
        await cuff.send(Hello(device_id="bp-anna"))
        await until(cuff, Welcome)
        await cuff.send(SensorReading(7, "blood_pressure", int(time.time()) - 30,
                                      (("systolic", "mmHg", 161.0), ("diastolic", "mmHg", 99.0))))
        first = await until(box, ReplyText, 30)
        assert first.text.startswith(RULE) and "161 over 99" in first.text
        assert await _spoken(box, 3) == []  # said once: not again by the feeding member nor twice by this one
        assert gateways[feeding].postgres.alert_relay.sent == 1
        assert [g.postgres.alert_relay.heard for g in gateways] == [1, 1]  # each member heard it once
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
