"""Cluster mode when the broker restarts under load: everybody comes back by themselves.

Three member processes and nine sensor boxes on a real mosquitto, readings every 0.3 s. The
broker is stopped (SIGTERM: every client's connection closes) and started again on the same port
after longer than a member timeout and a lease life (short timings here), empty: no retained
member records, device statuses or directory records survive it. The members reconnect and
subscribe again by themselves (their link's reconnect loop; the node re-subscribes and publishes
its member record at once), the boxes reconnect, say Hello and resend what was not acknowledged
(as firmware does). Then every box is served again, no downlink was ever sent under an older
lease than one already seen (the observer reconnects too), and every acknowledged reading is in
PostgreSQL exactly once.
"""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from gateway.cli.cluster_rig import ClusterRig
from gateway.links.mosquitto import find_mosquitto

pytestmark = pytest.mark.skipif(find_mosquitto() is None, reason="needs mosquitto (Debian package mosquitto)")

MEMBERS = ["gw-a", "gw-b", "gw-c"]
FAST = {"heartbeat_s": 0.5, "member_timeout_s": 1.5, "lease_ttl_s": 1.5}
DOWN_S = 3.0  # longer than a member timeout and a lease life: the members lose each other and their leases


def acked_not_exactly_once(rig: ClusterRig, dsn: str) -> list[tuple[str, int]]:
    with psycopg.connect(dsn) as conn:
        rows = dict(((d, s), n) for d, s, n in conn.execute(
            "SELECT device_id, seq, count(*) FROM readings GROUP BY device_id, seq"))
    acked = {(box.device_id, seq) for box in rig.boxes for seq in box.acked}
    assert acked
    return sorted(key for key in acked if rows.get(key) != 1)


async def test_a_broker_restart_under_load_is_survived_by_members_and_boxes(postgres_dsn, tmp_path: Path):
    rig = ClusterRig(tmp_path, postgres_dsn, FAST)
    rig.start_broker()
    try:
        await rig.start_members(MEMBERS)
        await rig.start_boxes(9, every_s=0.3)
        await rig.wait_all_served(timeout=30, readings=2)
        before = {box.device_id: len(box.acked) for box in rig.boxes}

        await rig.restart_broker(down_s=DOWN_S)
        await rig.wait_all_served(timeout=45, readings=3)
        for member in MEMBERS:  # each reconnects by itself (not restarted), within its back-off (<= 10 s)
            await rig.wait_logged(member, "mqtt: connected to", 2, timeout=30)
        await rig.wait_all_served(timeout=30, readings=2)  # and the boxes are served with all three back
    finally:
        await rig.stop()

    assert all(box.connects >= 2 for box in rig.boxes), {b.device_id: b.connects for b in rig.boxes}
    assert all(len(box.acked) >= before[box.device_id] + 5 for box in rig.boxes)
    assert all("lost the broker" in rig.log(member) for member in MEMBERS)
    assert rig.observer.overlaps() == []
    assert acked_not_exactly_once(rig, postgres_dsn) == []
