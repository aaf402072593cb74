"""The node's leases for WebSocket / CoAP sessions (`take` at their Hello), with the in-memory lease
table and the recording port of test_node.py (unit tests of own logic; two real member processes
with real WebSocket and CoAP boxes are in test_session_leases.py)."""

from __future__ import annotations

import asyncio
import json

from gateway.cluster.directory import Served
from gateway.cluster.node import ClusterNode
from tests.clock import Clock
from tests.cluster.test_node import Port, TableLeases, node


class TakingLeases(TableLeases):
    async def take(self, devices):  # the TAKE statement's rules: whoever holds it, the next epoch
        self._check()
        got = {}
        for d in devices:
            row = self.rows.get(d)
            previous = row[0] if row and row[0] != self.holder and row[2] > self.clock.now else None
            epoch = row[1] + 1 if row else 1
            self.rows[d] = (self.holder, epoch, self.clock.now + self.ttl)
            got[d] = (epoch, previous)
        return got


def member(me: str, rows: dict, clock: Clock) -> tuple[ClusterNode, TableLeases, Port]:
    return node(me, rows, clock, TakingLeases)


class Timer:
    """The node's timer running across the fake clock's steps, on the broker or off it."""

    def __init__(self, n: ClusterNode, connected: bool = True) -> None:
        self.node, self.on_broker = n, asyncio.Event()
        if connected:
            self.on_broker.set()
        self.task = asyncio.create_task(n.run(self.on_broker))  # its first round at the first step

    @classmethod
    async def started(cls, n: ClusterNode, connected: bool = True) -> "Timer":
        timer = cls(n, connected)
        await timer.step()
        return timer

    async def step(self, clock: Clock | None = None, seconds: float = 0.0) -> None:
        if clock is not None:
            clock.now += seconds
        self.node._wake.set()
        await asyncio.sleep(0.01)

    async def stop(self) -> None:
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)


async def tick(n: ClusterNode) -> None:
    timer = Timer(n)
    await timer.step()
    await timer.stop()


def directory_record(port: Port, device: str) -> bytes:
    return [p for t, p in port.published if t == f"gw/$cluster/devices/{device}"][-1]


async def test_a_hello_on_another_member_takes_the_lease_and_the_old_one_stops_at_its_renewal():
    clock, rows = Clock(), {}
    a, _, _ = member("gw-a", rows, clock)
    b, _, b_port = member("gw-b", rows, clock)
    lost_a: list[str] = []
    assert await a.roaming.take("ws-box", lost_a.append) == 1 and a.lease("ws-box") == 1
    assert await b.roaming.take("ws-box", lambda why: None) == 2  # a's lease still ran: taken over at once
    assert b.lease("ws-box") == 2 and rows["ws-box"][:2] == ("gw-b", 2)
    assert json.loads(directory_record(b_port, "ws-box"))["gateway"] == "gw-b"
    assert a.lease("ws-box") == 1 and lost_a == []  # a has heard nothing yet (no broker here)
    timer = await Timer.started(a)
    await timer.step(clock, 2.1)  # a's renewal, ttl / 3 later: the table says gw-b
    await timer.stop()
    assert lost_a == ["its lease was lost"] and a.lease("ws-box") is None
    assert a.roaming.sessions == {} and rows["ws-box"][:2] == ("gw-b", 2)  # a released nothing of b's


async def test_the_new_holders_directory_record_stops_the_old_session_before_any_renewal():
    clock, rows = Clock(), {}
    a, _, _ = member("gw-a", rows, clock)
    b, _, b_port = member("gw-b", rows, clock)
    lost_a: list[str] = []
    await a.roaming.take("ws-box", lost_a.append)
    a.on_message("gw/$cluster/devices/ws-box", Served("gw-x", 1, 1.0).encode())  # not newer: an old record
    a.on_message("gw/$cluster/devices/ws-box", Served("gw-a", 5, 1.0).encode())  # its own
    assert lost_a == [] and a.lease("ws-box") == 1
    await b.roaming.take("ws-box", lambda why: None)
    a.on_message("gw/$cluster/devices/ws-box", directory_record(b_port, "ws-box"))  # one broker hop
    assert lost_a == ["gateway gw-b took its lease (epoch 2)"] and a.lease("ws-box") is None


async def test_an_ended_session_releases_its_lease_but_never_a_newer_sessions():
    clock, rows = Clock(), {}
    a, _, _ = member("gw-a", rows, clock)
    first = await a.roaming.take("ws-box", lambda why: None)
    second = await a.roaming.take("ws-box", lambda why: None)  # the box reconnected to the same member
    assert (first, second) == (1, 2) and a.lease("ws-box") == 2
    a.roaming.drop("ws-box", first)  # the replaced session ends
    await tick(a)
    assert a.lease("ws-box") == 2 and rows["ws-box"][2] > clock.now
    a.roaming.drop("ws-box", second)
    await tick(a)
    assert a.lease("ws-box") is None and rows["ws-box"][2] == float("-inf")  # free for any member at once


async def test_off_the_broker_the_sessions_leases_are_renewed_and_the_mqtt_devices_are_not():
    clock, rows = Clock(), {}
    a, _, port = member("gw-a", rows, clock)
    a.on_status("mqtt-box", True)
    await tick(a)
    assert a.lease("mqtt-box") == 1
    await a.roaming.take("ws-box", lambda why: None)
    timer = await Timer.started(a, connected=False)
    for _ in range(8):  # 8 s off the broker, a renewal every 2 s
        await timer.step(clock, 1.0)
    await timer.stop()
    assert a.lease("ws-box") == 1 and a.lease("mqtt-box") is None
    assert port.handed == [("mqtt-box", "its lease was not renewed in time")]


async def test_a_take_while_postgresql_is_down_is_refused_and_logged(caplog):
    clock = Clock()
    a, leases, _ = member("gw-a", {}, clock)
    leases.down = True
    assert await a.roaming.take("ws-box", lambda why: None) is None
    assert a.lease("ws-box") is None and a.roaming.sessions == {}
    assert "could not take the lease on ws-box for its session (PostgreSQL: connection refused)" in caplog.text


async def test_a_clean_leave_releases_the_sessions_leases_too():
    clock, rows = Clock(), {}
    a, _, _ = member("gw-a", rows, clock)
    await a.roaming.take("ws-box", lambda why: None)
    await a.leave()
    assert a.lease("ws-box") is None and rows["ws-box"][2] == float("-inf")
    assert await a.roaming.take("ws-box", lambda why: None) is None  # leaving: no new sessions' leases
