"""Own logic of cluster mode: rendezvous placement, the member list, the directory, the config check."""

from __future__ import annotations

import pytest

from gateway.cluster.directory import DeviceDirectory, Served
from gateway.cluster.members import MemberList, MemberRecord
from gateway.cluster.rendezvous import owner
from gateway.config import ConfigError, parse_config
from tests.clock import Clock

DEVICES = [f"box-{i:03d}" for i in range(300)]


def test_every_gateway_computes_the_same_owner_whatever_the_order_of_its_list():
    for device in DEVICES[:50]:
        assert owner(device, ["a", "b", "c"]) == owner(device, ["c", "a", "b"])
    assert owner("box-1", []) is None


def test_devices_spread_over_the_members_and_a_leaving_one_moves_only_its_own():
    before = {d: owner(d, ["a", "b", "c"]) for d in DEVICES}
    counts = {m: sum(1 for o in before.values() if o == m) for m in "abc"}
    assert all(60 <= n <= 140 for n in counts.values()), counts  # ~100 each
    after = {d: owner(d, ["a", "c"]) for d in DEVICES}
    moved = [d for d in DEVICES if before[d] != after[d]]
    assert moved and all(before[d] == "b" for d in moved)  # only b's devices move
    joined = {d: owner(d, ["a", "b", "c", "d"]) for d in DEVICES}
    assert all(joined[d] in (before[d], "d") for d in DEVICES)  # a new member only takes, never reshuffles


def record(member: str) -> bytes:
    return MemberRecord(member, 1.0, 64).encode()


def test_members_come_with_their_record_and_go_with_their_will_or_their_silence(caplog):
    clock = Clock(100.0)
    members = MemberList("a", timeout_s=6, clock=clock)
    assert members.live() == ("a",)
    assert members.heard("b", record("b")) == "joined"
    assert members.heard("b", record("b")) is None  # a heartbeat
    assert members.heard("c", record("c")) == "joined"
    assert members.live() == ("a", "b", "c")
    assert members.heard("c", b"") == "left"  # its Last Will (an empty retained message)
    clock.now += 5
    members.heard("a", record("a"))
    assert members.expire() == []
    clock.now += 1.5
    assert members.expire() == ["b"]  # no heartbeat for more than 6 s
    assert members.live() == ("a",)  # never itself


def test_a_bad_member_record_is_logged_and_ignored(caplog):
    members = MemberList("a", timeout_s=6)
    assert members.heard("x", b"{not json") is None
    assert members.heard("y", record("z")) is None  # names another member than its topic
    assert members.live() == ("a",)
    assert "members/x: not a member record" in caplog.text
    assert "members/y: it names member 'z'" in caplog.text


def test_the_directory_names_a_device_s_gateway_only_while_that_gateway_is_a_member():
    directory = DeviceDirectory()
    directory.status("box-1", True)
    directory.status("box-2", False)
    directory.heard("box-1", Served("gw-a", 3, 10.0).encode())
    directory.heard("box-2", b"garbage")
    (one, two) = directory.entries(("gw-a", "gw-b"))
    assert (one.device_id, one.online, one.gateway, one.epoch) == ("box-1", True, "gw-a", 3)
    assert (two.device_id, two.online, two.gateway) == ("box-2", False, None)
    assert directory.entries(("gw-b",))[0].gateway is None  # gw-a is gone: nobody serves box-1 now
    assert directory.online() == ["box-1"]


def test_cluster_mode_is_off_by_default_and_names_what_it_needs():
    assert parse_config({}).cluster.enabled is False
    with pytest.raises(ConfigError) as err:
        parse_config({"cluster": {"enabled": True}})
    for needed in ("mqtt.host", 'mqtt.protocol: "5"', "storage: postgres"):
        assert needed in str(err.value)
    cfg = parse_config({"cluster": {"enabled": True, "id": "gw-a"}, "mqtt": {"host": "broker.lan", "protocol": "5"},
                        "storage": "postgres"})
    assert (cfg.cluster.heartbeat_s, cfg.cluster.member_timeout_s, cfg.cluster.lease_ttl_s) == (2.0, 6.0, 6.0)
    with pytest.raises(ConfigError, match="at least twice"):
        parse_config({"cluster": {"heartbeat_s": 4, "member_timeout_s": 6}})


def test_cluster_mode_refuses_xiaozhi_mqtt_udp_naming_the_key():
    # every member would answer a box's MQTT hello (docs/XIAOZHI.md "In cluster mode")
    with pytest.raises(ConfigError, match="xiaozhi.mqtt_udp: false"):
        parse_config({"cluster": {"enabled": True, "id": "gw-a"}, "mqtt": {"host": "broker.lan", "protocol": "5"},
                      "storage": "postgres", "xiaozhi": {"mqtt_udp": True}})
