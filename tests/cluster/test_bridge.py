"""Cluster mode across a mosquitto bridge: members and boxes on two brokers, failover across it.

Broker "b" is a second mosquitto bridged to broker "a" (an MQTT 5 `connection` bridge, `P/#`
both ways: gateway/cli/cluster_rig.py `bridge_config`). Member gw-a is a client of broker a,
gw-b of broker b; four boxes are on each broker. Rendezvous hashing ignores where a box is, so
each member serves boxes on both sides: the member records (retained, with message expiry), the
device statuses, the directory records, the boxes' uplinks and the downlinks with their `lease`
user property all cross the bridge. gw-b is killed (SIGKILL: broker b fires its Will, which
crosses the bridge): gw-a takes every box, the ones on broker b through the bridge. Then broker
b itself restarts (its boxes and the bridge reconnect; retained messages are sent across again
when the bridge comes back): every box is served again by gw-a. Throughout, the observer on
broker a sees every downlink of both sides with its lease (none without one, none under an older
epoch than one seen) and every acknowledged reading is in PostgreSQL exactly once.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from gateway.cli.cluster_rig import ClusterRig
from gateway.links.mosquitto import find_mosquitto
from tests.cluster.test_broker_restart import FAST, acked_not_exactly_once

pytestmark = pytest.mark.skipif(find_mosquitto() is None, reason="needs mosquitto (Debian package mosquitto)")


async def test_members_and_boxes_on_two_bridged_brokers_share_the_boxes_and_fail_over_across_the_bridge(
        postgres_dsn, tmp_path: Path):
    rig = ClusterRig(tmp_path, postgres_dsn, FAST)
    rig.start_broker("a")
    rig.start_broker("b", bridge_to="a")
    try:
        await rig.wait_bridged("b")
        await rig.start_members(["gw-a", "gw-b"], {"gw-b": {"broker_port": rig.brokers["b"]}})
        await rig.start_boxes(4, every_s=0.3, prefix="near", broker="a")
        await rig.start_boxes(4, every_s=0.3, prefix="far", broker="b")
        await rig.wait_all_served(timeout=30, readings=2)
        holders = rig.holders()
        crossing = {d for d, g in holders.items() if (g == "gw-a") == d.startswith("far")}
        assert set(holders.values()) == {"gw-a", "gw-b"} and crossing, holders  # served across the bridge

        orphans = sorted(d for d, g in holders.items() if g == "gw-b")
        at = rig.kill("gw-b", signal.SIGKILL)
        back = await rig.failover(orphans, at, "gw-b", timeout=20)
        assert sorted(back) == orphans
        await rig.wait_all_served(timeout=30, readings=2)
        assert set(rig.holders().values()) == {"gw-a"}

        await rig.restart_broker("b", down_s=1.0)  # the far boxes and the bridge reconnect
        await rig.wait_bridged("b")
        await rig.wait_all_served(timeout=30, readings=2)
    finally:
        await rig.stop()

    assert all(box.connects >= 2 for box in rig.boxes if box.device_id.startswith("far"))
    assert rig.observer.overlaps() == []  # every downlink of both brokers seen with its lease, none stale
    assert acked_not_exactly_once(rig, postgres_dsn) == []
