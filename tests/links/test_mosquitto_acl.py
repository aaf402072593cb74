"""The embedded mosquitto's ACL, linear in the number of devices (one `pattern deny` per registered
device instead of a deny of every other device in each device's section): with the real mosquitto
run by the gateway, a logged-in device still cannot read or write another device's topics, not
even under that device's client id, and its own work; the file stays small for many devices and
mosquitto's warning about each deny pattern stays out of the gateway's log."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import pytest_asyncio

from firmware_protocol import Hello, SensorReading, Welcome, decode, encode
from gateway.devices.auth import add_device
from gateway.links import mosquitto as mosquitto_module
from gateway.links.mosquitto_files import BrokerSettings, render_acl
from tests.links.test_mqtt_broker_attacks import HUMID, Attacker, Setup, serve

pytestmark = pytest.mark.skipif(mosquitto_module.find_mosquitto() is None, reason="needs mosquitto")
on_the_loop = pytest.mark.asyncio(loop_scope="session")


@dataclass
class LiveC:
    """dev-c connected with its login under another client id (so a spy may use "dev-c"), speaking
    the device protocol by hand: its Hello answered, its readings acked on gw/dev-c/down."""

    client: Attacker
    token: str
    seq: int = 960

    async def down(self, n: int, timeout: float = 5) -> None:
        async with asyncio.timeout(timeout):
            while sum(t == "gw/dev-c/down" for t, _ in self.client.got) < n:
                self.client.arrived.clear()
                await self.client.arrived.wait()

    async def reading(self) -> None:
        """One reading, acked (its session handles what came before on gw/dev-c/up first)."""
        self.seq += 1
        before = sum(t == "gw/dev-c/down" for t, _ in self.client.got)
        self.client.client.publish("gw/dev-c/up", encode(SensorReading(self.seq, "humidity", 0, HUMID)), 1)
        await self.down(before + 1)


@pytest_asyncio.fixture(loop_scope="session", params=[False, True], ids=["enrolment-closed", "enrolment-open"])
async def setup(request, tmp_path, fake_runner) -> AsyncIterator[tuple[Setup, LiveC]]:
    async for s in serve(tmp_path, request.param, fake_runner):
        yield s, await live_c(s)


async def live_c(s: Setup) -> LiveC:
    token = await s.gateway.db.run(add_device, "dev-c", "")
    await s.link.broker.reload()
    c = LiveC(Attacker("dev-c-real", "dev-c", token), token)
    await c.client.client.connect("127.0.0.1", s.link.port)
    c.client.client.subscribe("gw/dev-c/down", 1)
    c.client.client.publish("gw/dev-c/up", encode(Hello(device_id="dev-c", token=token)), 1)
    await c.down(1)
    assert isinstance(decode(c.client.got[0][1]), Welcome)
    return c


async def subscribed(spy: Attacker, topic: str, timeout: float = 5) -> None:
    """Subscribe and wait for the broker's SUBACK."""
    acked = asyncio.Event()
    loop = asyncio.get_running_loop()
    spy.client.client.on_subscribe = lambda *args: loop.call_soon(acked.set)
    spy.client.subscribe(topic, 1)
    await asyncio.wait_for(acked.wait(), timeout)


async def spied(s: Setup, c: LiveC, spy: Attacker, own: str | None, token: str = "") -> None:
    """`spy` (connected) subscribes to dev-a's and dev-c's downlinks (both connected) and to
    everything, injects readings into their uplinks, then says Hello on its own topics (`own`, if
    it has any): it must get only its own Welcome, and nothing it injected may be stored."""
    for victim in ("gw/dev-a", "gw/dev-c"):
        spy.client.subscribe(f"{victim}/down", 1)
    spy.client.subscribe("#", 1)
    if own is not None:
        spy.client.subscribe(f"gw/{own}/down", 1)
    for seq, victim in ((950, "gw/dev-a"), (951, "gw/dev-c")):
        spy.client.publish(f"{victim}/up", encode(SensorReading(seq, "humidity", 0, HUMID)), 1)
        spy.client.publish(f"{victim}/status", b"offline", 1, retain=True)
    await s.victim_is_served()  # acks to dev-a and dev-c go out on their downlinks...
    await c.reading()
    if own is not None:
        spy.client.publish(f"gw/{own}/up", encode(Hello(device_id=own, token=token)), 1)
        await spy.until(f"gw/{own}/down")  # ...before the spy's own answer, in the broker's order
        assert isinstance(decode(spy.got[0][1]), Welcome)
    else:  # no topics of its own: its SUBACK comes after what the broker had queued for it already
        await subscribed(spy, "gw/nobody/down")
    assert [t for t, _ in spy.got] == ([f"gw/{own}/down"] if own else []), spy.got
    await c.reading()  # anything injected on gw/dev-c/up came before this
    await s.victim_is_served()
    rows = await s.gateway.db.run(lambda db: db.execute("SELECT device_id, seq FROM readings"
                                                        " WHERE seq BETWEEN 950 AND 959").fetchall())
    assert rows == []


@on_the_loop
async def test_a_logged_in_device_cannot_read_or_write_another_devices_topics(setup):
    s, c = setup
    spy = Attacker("dev-b", "dev-b", s.tokens["dev-b"])
    await spy.client.connect("127.0.0.1", s.link.port)
    await spied(s, c, spy, "dev-b", s.tokens["dev-b"])
    await spy.client.disconnect()
    await s.victim_is_served()


@on_the_loop
async def test_a_logged_in_device_using_another_registered_devices_client_id_gets_nothing_of_it(setup):
    s, c = setup  # closed enrolment: the broker names the client after its username; open: the deny patterns
    spy = Attacker("dev-c", "dev-b", s.tokens["dev-b"])
    await spy.client.connect("127.0.0.1", s.link.port)
    await spied(s, c, spy, "dev-b", s.tokens["dev-b"])
    await spy.client.disconnect()


@on_the_loop
@pytest.mark.parametrize("client_id", ["newbie", "dev-c"])
async def test_an_anonymous_client_gets_its_own_topics_and_no_registered_ones(fake_runner, tmp_path, client_id):
    async for s in serve(tmp_path, True, fake_runner):
        c = await live_c(s)
        spy = Attacker(client_id)
        await spy.client.connect("127.0.0.1", s.link.port)
        await spied(s, c, spy, client_id if client_id == "newbie" else None)  # dev-c: registered, so nothing
        await spy.client.disconnect()


@on_the_loop
async def test_a_reload_with_many_devices_logs_no_acl_warnings(fake_runner, tmp_path, caplog):
    async for s in serve(tmp_path, True, fake_runner):
        caplog.set_level(logging.INFO)
        for i in range(30):
            await s.gateway.db.run(add_device, f"many-{i:02d}", "")
        assert await s.link.broker.reload()
        assert "added many-00, many-01" in caplog.text and "and 20 more" in caplog.text
        await s.victim_is_served()
        assert not [r for r in caplog.records if "ACL pattern" in r.getMessage() and r.levelno >= logging.INFO]


@pytest.mark.parametrize("open_enrolment", [False, True])
def test_the_acl_grows_linearly_with_the_devices(open_enrolment):
    settings = BrokerSettings("127.0.0.1", 1, "gw", 66560, open_enrolment, "edge-gateway-x", Path("/tmp"), "root")
    sizes = {n: render_acl(settings, [f"xiaozhi-{i:012x}" for i in range(n)]).count("\n") for n in (100, 1000)}
    per_device = (sizes[1000] - sizes[100]) / 900
    assert per_device <= 6, sizes  # 4 lines of its section + its deny pattern (open) + a blank line
    text = render_acl(settings, ["dev-a", "dev-b"])
    assert all(line.count("dev-") <= 1 for line in text.splitlines())  # no line names two devices
