"""Cluster mode when PostgreSQL goes away: the fence holds and nothing acknowledged is lost.

Two member processes, four sensor boxes. PostgreSQL is stopped for five lease lives with short
timings (leases of 1.5 s), and for the 30 s of issue 17 with the default timings (leases of 6 s):
no member can renew, so each ends its sessions before its leases could
have run out and answers nothing more (no downlink is seen from a lease's end until PostgreSQL is
back), readings are not acknowledged meanwhile (the boxes keep them and resend). Once it is back
the members take their leases again, every box is served and every acknowledged reading is in
PostgreSQL exactly once.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import psycopg
import pytest

from gateway.cli.cluster_rig import ClusterRig
from gateway.links.mosquitto import find_mosquitto

pytestmark = pytest.mark.skipif(find_mosquitto() is None, reason="needs mosquitto (Debian package mosquitto)")

FAST = {"heartbeat_s": 0.5, "member_timeout_s": 1.5, "lease_ttl_s": 1.5}
DEFAULTS = {"heartbeat_s": 2.0, "member_timeout_s": 6.0, "lease_ttl_s": 6.0}  # gateway.yaml's cluster section
DELIVERY_SLACK_S = 2.0  # a downlink sent just before its lease ran out, still on its way (a busy machine)


@pytest.mark.parametrize(("timings", "down_s"), [(FAST, FAST["lease_ttl_s"] * 5), (DEFAULTS, 30.0)],
                         ids=["short-leases-7.5s", "default-leases-30s"])
async def test_postgresql_down_longer_than_a_lease_silences_the_members_and_loses_nothing(
        postgres_server, postgres_dsn, tmp_path: Path, timings: dict[str, float], down_s: float):
    rig = ClusterRig(tmp_path, postgres_dsn, timings)
    rig.start_broker()
    try:
        await rig.start_members(["gw-a", "gw-b"])
        await rig.start_boxes(4, every_s=0.2)
        await rig.wait_all_served(timeout=30, readings=2)

        await asyncio.to_thread(postgres_server.stop)
        stopped = time.monotonic()
        await asyncio.sleep(down_s)
        restarted = time.monotonic()  # before start(): the members may take leases as soon as it listens
        await asyncio.to_thread(postgres_server.start)

        await rig.wait_all_served(timeout=60, readings=3)
    finally:
        await rig.stop()
        if not postgres_server.running:
            postgres_server.start()

    silent_from = stopped + timings["lease_ttl_s"] + DELIVERY_SLACK_S
    spoke = [d for d in rig.observer.seen if silent_from < d.at < restarted]
    assert spoke == [], spoke[:5]  # nobody could prove a lease: nobody answered (no ReadingAck either)
    assert any("PostgreSQL unreachable for the device leases" in rig.log(m) for m in ("gw-a", "gw-b"))
    assert rig.observer.overlaps() == []
    with psycopg.connect(postgres_dsn) as conn:
        rows = dict(((d, s), n) for d, s, n in conn.execute(
            "SELECT device_id, seq, count(*) FROM readings GROUP BY device_id, seq"))
    acked = {(box.device_id, seq) for box in rig.boxes for seq in box.acked}
    assert [key for key in acked if rows.get(key) != 1] == []
