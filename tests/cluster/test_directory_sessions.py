"""The cluster directory's WebSocket / CoAP devices (no status on the broker): online while their
session lives on a live member, offline once it ended there, and a late record of the member that
served them before never stays over the new holder's (unit tests of the node's own logic with the
in-memory lease table and the recording port; the real members are in test_directory_rig.py)."""

from __future__ import annotations

import json
import logging

from gateway.cluster.directory import DeviceDirectory, Served
from tests.clock import Clock
from tests.cluster.test_node_sessions import directory_record, member, tick

TOPIC = "gw/$cluster/devices/ws-box"


def heard_everywhere(payload: bytes, *nodes) -> None:
    """One broker hop: every member hears the retained record (its own publisher too)."""
    for n in nodes:
        n.on_message(TOPIC, payload)


def entry(n, device: str = "ws-box") -> dict:
    return next(e.as_dict() for e in n.devices() if e.device_id == device)


def live(n, *members: str) -> None:
    for m in members:
        n.on_message(f"gw/$cluster/members/{m}", json.dumps({"id": m, "since": 1.0, "capacity": 1}).encode(), 6)


async def test_a_session_is_online_while_it_lives_and_offline_when_it_ends_on_its_member():
    clock, rows = Clock(), {}
    a, _, a_port = member("gw-a", rows, clock)
    b, _, _ = member("gw-b", rows, clock)
    for n in (a, b):
        live(n, "gw-a", "gw-b")
    epoch = await a.roaming.take("ws-box", lambda why: None)
    heard_everywhere(directory_record(a_port, "ws-box"), a, b)
    assert entry(b) == entry(b) | {"online": True, "gateway": "gw-a", "epoch": epoch}
    a.roaming.drop("ws-box", epoch)  # the box closed its connection
    assert json.loads(directory_record(a_port, "ws-box")) == json.loads(directory_record(a_port, "ws-box")) | {
        "gateway": "gw-a", "epoch": epoch, "session": False}
    heard_everywhere(directory_record(a_port, "ws-box"), a, b)
    assert entry(b) == entry(b) | {"online": False, "gateway": "gw-a", "epoch": epoch}
    await tick(a)
    assert rows["ws-box"][2] == float("-inf")  # released as before


async def test_a_session_ended_by_the_new_holders_record_leaves_that_record_alone():
    clock, rows = Clock(), {}
    a, _, a_port = member("gw-a", rows, clock)
    b, _, b_port = member("gw-b", rows, clock)
    lost: list[str] = []
    first = await a.roaming.take("ws-box", lost.append)
    second = await b.roaming.take("ws-box", lambda why: None)
    published = len(a_port.published)
    heard_everywhere(directory_record(b_port, "ws-box"), a, b)
    a.roaming.drop("ws-box", first)  # the ended session's own end, after its lease went
    assert lost and len(a_port.published) == published  # not a record more from a
    assert json.loads(directory_record(b_port, "ws-box")) | {"session": True} == json.loads(
        directory_record(b_port, "ws-box")) and json.loads(directory_record(b_port, "ws-box"))["epoch"] == second


async def test_a_late_ended_record_of_the_old_member_is_answered_by_the_holder_with_its_own():
    """The box closed on A and said Hello to B at once: A's `session: false` (epoch 1) is published
    before A heard B's record (epoch 2), and reaches the broker after it."""
    clock, rows = Clock(), {}
    a, _, a_port = member("gw-a", rows, clock)
    b, _, b_port = member("gw-b", rows, clock)
    for n in (a, b):
        live(n, "gw-a", "gw-b")
    first = await a.roaming.take("ws-box", lambda why: None)
    await b.roaming.take("ws-box", lambda why: None)
    a.roaming.drop("ws-box", first)  # A has not heard B's record yet
    late = directory_record(a_port, "ws-box")
    assert json.loads(late)["session"] is False
    heard_everywhere(directory_record(b_port, "ws-box"), a, b)
    heard_everywhere(late, a, b)  # the retained record is A's now
    answer = directory_record(b_port, "ws-box")
    assert json.loads(answer) == {**json.loads(answer), "gateway": "gw-b", "epoch": 2, "session": True}
    heard_everywhere(answer, a, b)
    assert entry(a) == entry(a) | {"online": True, "gateway": "gw-b", "epoch": 2}
    count = len(b_port.published)
    heard_everywhere(answer, a, b)  # its own record again: nothing more
    assert len(b_port.published) == count


async def test_a_sessions_lease_not_renewed_in_time_says_it_ended():
    from tests.cluster.test_node_sessions import Timer

    clock, rows = Clock(), {}
    a, leases, a_port = member("gw-a", rows, clock)
    epoch = await a.roaming.take("ws-box", lambda why: None)
    heard_everywhere(directory_record(a_port, "ws-box"), a)
    leases.down = True  # PostgreSQL gone: the renewals fail
    timer = await Timer.started(a)
    for _ in range(7):
        await timer.step(clock, 1.0)
    await timer.stop()
    assert a.lease("ws-box") is None
    assert json.loads(directory_record(a_port, "ws-box")) | {"epoch": epoch, "session": False} == json.loads(
        directory_record(a_port, "ws-box"))


def test_mqtt_records_have_no_session_and_a_bad_session_value_is_ignored(caplog):
    directory = DeviceDirectory()
    assert "session" not in json.loads(Served("gw-a", 3, 1.0).encode())
    directory.heard("mqtt-box", Served("gw-a", 3, 1.0).encode())
    directory.status("mqtt-box", True)
    with caplog.at_level(logging.WARNING):
        directory.heard("odd-box", b'{"gateway": "gw-a", "epoch": 1, "since": 1.0, "session": "yes"}')
    assert [(e.device_id, e.online, e.gateway) for e in directory.entries(("gw-a",))] == [("mqtt-box", True, "gw-a")]
    assert "ignored the directory record of device odd-box: session must be true or false, not 'yes'" in caplog.text
    directory.heard("ws-box", Served("gw-a", 1, 1.0, session=True).encode())
    assert [e.online for e in directory.entries(("gw-b",)) if e.device_id == "ws-box"] == [False]  # gw-a gone
