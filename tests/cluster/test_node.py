"""The node's own decisions, with an in-memory lease table and a recording port (unit tests of
own logic; the real broker and PostgreSQL are in test_failover.py and test_outages.py)."""

from __future__ import annotations

import asyncio

from gateway.cluster.leases import LeaseStoreDown
from gateway.cluster.members import MemberRecord
from gateway.cluster.node import ClusterNode
from gateway.cluster.rendezvous import owner
from tests.clock import Clock


class TableLeases:
    """device_leases in memory, with the same rules as the SQL (gateway/cluster/leases.py)."""

    def __init__(self, holder: str, rows: dict, clock: Clock, ttl: float) -> None:
        self.holder, self.rows, self.clock, self.ttl = holder, rows, clock, ttl
        self.down = False

    def _check(self) -> None:
        if self.down:
            raise LeaseStoreDown("connection refused")

    async def claim(self, devices):
        self._check()
        got = {}
        for d in devices:
            row = self.rows.get(d)
            if row is None or row[0] == self.holder or row[2] < self.clock.now:
                epoch = row[1] + 1 if row else 1
                self.rows[d] = (self.holder, epoch, self.clock.now + self.ttl)
                got[d] = epoch
        return got

    async def renew(self, devices):
        self._check()
        got = {}
        for d in devices:
            row = self.rows.get(d)
            if row and row[0] == self.holder and row[2] > self.clock.now:
                self.rows[d] = (self.holder, row[1], self.clock.now + self.ttl)
                got[d] = row[1]
        return got

    async def release(self, devices):
        self._check()
        for d in devices:
            if d in self.rows and self.rows[d][0] == self.holder:
                self.rows[d] = (self.holder, self.rows[d][1], float("-inf"))

    async def release_all(self):
        await self.release(list(self.rows))

    async def close(self):
        pass


class Port:
    def __init__(self) -> None:
        self.subscribed: set[str] = set()
        self.taken: list[tuple[str, int]] = []
        self.handed: list[tuple[str, str]] = []
        self.published: list[tuple[str, bytes]] = []

    def publish(self, topic, payload, *, retain=False, expiry_s=None, qos=1):
        self.published.append((topic, payload))

    def subscribe(self, topic):
        self.subscribed.add(topic)

    def unsubscribe(self, topic):
        self.subscribed.discard(topic)

    def take_over(self, device_id, epoch):
        self.taken.append((device_id, epoch))

    def hand_over(self, device_id, reason):
        self.handed.append((device_id, reason))


def node(me: str, rows: dict, clock: Clock, table: type[TableLeases] = TableLeases
         ) -> tuple[ClusterNode, TableLeases, Port]:
    """A member on the recording port, its leases in `table` (rows shared with the other members)."""
    leases = table(me, rows, clock, 6.0)
    n = ClusterNode(me, "gw", leases, heartbeat_s=2, member_timeout_s=6, lease_ttl_s=6, clock=clock)
    port = Port()
    n.on_connected(port)
    return n, leases, port


async def tick(n: ClusterNode) -> None:
    """One round of the node's timer."""
    connected = asyncio.Event()
    connected.set()
    task = asyncio.create_task(n.run(connected))
    await asyncio.sleep(0.01)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


DEVICES = [f"box-{i}" for i in range(12)]


async def test_a_member_takes_its_devices_and_hands_them_to_one_that_joins():
    clock, rows = Clock(), {}
    a, _, port = node("gw-a", rows, clock)
    for d in DEVICES:
        a.on_status(d, True)
    assert port.subscribed >= {f"gw/{d}/up" for d in DEVICES}  # alone: it owns them all
    await tick(a)
    assert sorted(d for d, _ in port.taken) == sorted(DEVICES) and all(a.lease(d) == 1 for d in DEVICES)
    a.on_message("gw/$cluster/members/gw-b", MemberRecord("gw-b", 1.0, 64).encode())
    moved = [d for d in DEVICES if owner(d, ["gw-a", "gw-b"]) == "gw-b"]
    assert moved and sorted(d for d, _ in port.handed) == sorted(moved)
    assert all(a.lease(d) is None for d in moved) and all(f"gw/{d}/up" not in port.subscribed for d in moved)
    await tick(a)  # released in the table: gw-b gets them at once
    b, _, b_port = node("gw-b", rows, clock)
    b.on_message("gw/$cluster/members/gw-a", MemberRecord("gw-a", 1.0, 64).encode())
    for d in DEVICES:
        b.on_status(d, True)
    await tick(b)
    assert sorted(d for d, _ in b_port.taken) == sorted(moved)
    assert all(epoch == 2 for _, epoch in b_port.taken)


async def test_a_member_that_cannot_renew_goes_silent_before_its_lease_runs_out():
    clock, rows = Clock(), {}
    a, leases, port = node("gw-a", rows, clock)
    a.on_status("box-1", True)
    await tick(a)
    assert a.lease("box-1") == 1
    leases.down = True  # PostgreSQL unreachable: renewals fail
    clock.now += 5.4
    await tick(a)
    assert a.lease("box-1") == 1  # still within ttl - margin of the last good renewal
    clock.now += 0.2
    assert a.lease("box-1") is None  # 5.6 s > 6 - 0.5: silent, while the table still says 0.4 s more
    assert rows["box-1"][2] > clock.now
    await tick(a)
    assert port.handed == [("box-1", "its lease was not renewed in time")]


async def test_a_claim_refused_is_tried_again_until_the_other_lease_runs_out():
    clock, rows = Clock(), {"box-1": ("gw-x", 7, 1003.0)}  # a dead member's lease, 3 s left
    a, _, port = node("gw-a", rows, clock)
    a.on_status("box-1", True)
    await tick(a)
    assert port.taken == [] and a.lease("box-1") is None
    clock.now += 3.1
    await tick(a)
    assert port.taken == [("box-1", 8)]


async def test_a_clean_leave_deletes_the_member_record_and_frees_everything():
    clock, rows = Clock(), {}
    a, _, port = node("gw-a", rows, clock)
    for d in DEVICES[:3]:
        a.on_status(d, True)
    await tick(a)
    await a.leave()
    assert ("gw/$cluster/members/gw-a", b"") in port.published
    assert all(rows[d][2] == float("-inf") for d in DEVICES[:3])


async def test_a_member_record_without_its_message_expiry_is_named_once_and_still_counted(caplog):
    clock = Clock()
    a, _, _ = node("gw-a", {}, clock)
    a.on_message("gw/$cluster/members/gw-b", MemberRecord("gw-b", 1.0, 64).encode(), expiry_s=6)
    assert "message expiry" not in caplog.text
    a.on_message("gw/$cluster/members/gw-c", MemberRecord("gw-c", 1.0, 64).encode())  # over an MQTT 3.1.1 bridge
    a.on_message("gw/$cluster/members/gw-c", MemberRecord("gw-c", 1.0, 64).encode())
    assert caplog.text.count("the member record of gw-c came without its MQTT 5 message expiry") == 1
    assert "bridge_protocol_version mqttv50" in caplog.text
    assert a.membership.live() == ("gw-a", "gw-b", "gw-c")  # the heartbeat timeout still drops it when it dies
