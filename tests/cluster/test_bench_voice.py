"""`gateway bench-cluster --voice` and its CPU quotas (gateway/cli/cgroup_quota.py).

The cgroup helper on this machine's real cpu controller (skipped, with the reason, where there is
none writable: not root, a container without its own cgroup): a busy process put into a group of
0.1 core gets no more than that quota of CPU (an upper bound the kernel enforces: a loaded machine
gives it less, never more), and the group is gone once it has ended. The reasons given where no
controller is usable, on mount tables of our own. Then the voice mode's smoke run: one member
(the fake engines, in its cgroup), one box then two, a real mosquitto and PostgreSQL: the line
has its reference, its rounds and the member's CPU.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gateway.cli.bench_cluster_voice import balanced_ids, measure
from gateway.cluster.rendezvous import owner
from gateway.cli.cgroup_quota import CgroupUnavailable, cpu_controller, process_cpu_s
from gateway.links.mosquitto import find_mosquitto


def _controller_or_skip():
    try:
        return cpu_controller()
    except CgroupUnavailable as exc:
        pytest.skip(str(exc))


def test_the_boxes_ids_are_placed_round_robin_by_the_clusters_hashing() -> None:
    members = ["gw-a", "gw-b", "gw-c"]
    ids = balanced_ids("m3n7", 7, members)
    assert len(set(ids)) == 7
    assert [owner(d, members) for d in ids] == ["gw-a", "gw-b", "gw-c", "gw-a", "gw-b", "gw-c", "gw-a"]


def test_no_usable_controller_is_named_with_the_reason(tmp_path: Path) -> None:
    v1 = tmp_path / "cpu"
    v1.mkdir()  # a cpu hierarchy without CFS bandwidth control
    v2 = tmp_path / "unified"
    v2.mkdir()
    (v2 / "cgroup.controllers").write_text("memory pids\n")
    mounts = (f"cgroup {v1} cgroup rw,relatime,cpu 0 0\n"
              f"cgroup2 {v2} cgroup2 rw,relatime 0 0\n"
              "proc /proc proc rw 0 0\n")
    with pytest.raises(CgroupUnavailable) as caught:
        cpu_controller(mounts)
    assert f"{v1}: a cgroup v1 cpu hierarchy without cpu.cfs_quota_us" in str(caught.value)
    assert f"{v2}: cgroup v2 without the cpu controller (cgroup.controllers: memory pids)" in str(caught.value)
    with pytest.raises(CgroupUnavailable, match="no cgroup file system is mounted"):
        cpu_controller("proc /proc proc rw 0 0\n")


def test_a_group_holds_a_busy_process_to_its_quota() -> None:
    controller = _controller_or_skip()
    group = controller.group(f"gateway-test-{time.time_ns()}", 0.1, weight=2.0)
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        assert group.quota() == (10_000, 100_000)
        assert group.weight() == 2.0
        group.add(busy.pid)
        assert group.pids() == [busy.pid]
        cpu0, wall0 = process_cpu_s(busy.pid), time.monotonic()
        time.sleep(2.0)
        used, wall = process_cpu_s(busy.pid) - cpu0, time.monotonic() - wall0
        # the quota is 0.1 core per 100 ms period: at most 0.1 x wall, plus one period's share and a tick
        assert used <= 0.1 * wall + 0.03, f"{used:.2f} CPU s in {wall:.2f} s under a 0.1 core quota"
        assert group.throttled_s() >= 0.0
    finally:
        busy.kill()
        busy.wait()
    for _ in range(50):
        try:
            group.remove()
            break
        except CgroupUnavailable:
            time.sleep(0.1)
    assert not group.path.exists()


@pytest.mark.skipif(find_mosquitto() is None, reason="needs mosquitto (Debian package mosquitto)")
def test_the_voice_line_smoke_run_with_one_member(postgres_dsn: str, tmp_path: Path) -> None:
    _controller_or_skip()
    args = argparse.Namespace(gateways=[1], member_cpu=0.5, member_weight=2.0, turns=2, reference_turns=2, step=0, max_boxes=2, spread=1.0,
                              fake_engines=True, keep=tmp_path)
    report = measure(args, None, postgres_dsn, lambda line: None)
    (one,) = report["line"]
    assert one["gateways"] == 1
    reference = one["rounds"][0]
    assert reference["boxes"] == 1 and reference["answered"] == reference["turns"] >= 2
    assert report["deadline_ms"] == round(1.5 * reference["p95_ms"])
    assert [r["boxes"] for r in one["rounds"]] in ([1], [1, 2])  # stops at the first round past the deadline
    for row in one["rounds"]:
        assert row["spread"] == {"gw-a": row["boxes"]}
        assert row["member_cores"]["gw-a"] > 0  # the member's CPU, read from /proc while it served
        assert row["within"] == (row["failed"] == 0 and row["p95_ms"] <= report["deadline_ms"])
    assert one["boxes_at_deadline"] == max(r["boxes"] for r in one["rounds"] if r["within"])
    assert report["overlapping_leases"] == 0
    assert report["cgroup"].startswith(("v1 ", "v2 "))
    assert not list(Path(report["cgroup"].split(" ", 1)[1]).glob("gateway-bench-*"))  # groups removed
