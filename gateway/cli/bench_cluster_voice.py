"""`gateway bench-cluster --voice`: voice boxes served at the latency deadline by 1, 2, 3 gateways.

The line of docs/SCALE-OUT.md "Capacity maths", on one machine: each member is a separate
`gateway.cli.cluster_target` process with the models `gateway run` loads (`real_models`; the fake
engines with `--fake-engines`, for the smoke test), in cluster mode behind a loopback mosquitto,
and each is put, once its models are loaded, into its own CPU cgroup limited to `--member-cpu`
cores, with `--member-weight` times the default CPU weight (gateway/cli/cgroup_quota.py): the
quota is its ceiling, the weight lets it reach it on a loaded machine (a group competes with the
processes outside it as one process), so its budget is about fixed, as on a small machine of its
own, whatever the other members and the machine's other work do: adding a member adds a budget.
The emulated voice boxes run in the bench process (not limited), over MQTT, welcomed as
gateway/cli/cluster_voice_box.py is, then in conversation as `gateway bench-capacity` defines it
(its Box: the microphone streams in real time, a 2-4 s question, the whole reply, a 3-8 s pause,
again; the first questions spread over `--spread` s).

The reference is one box on one member (M=1, N=1, `--reference-turns` questions): its p95 of end
of input -> first reply audio (measured by the box) times 1.5 is the deadline. For M = 1, 2, 3 members (gw-a, then gw-b and
gw-c added to the running ones), N grows from M by `--step` boxes (default M: one more per
member) until a round's p95 passes the deadline or a turn fails; the boxes at the deadline for M
are the last N that held. Each round has fresh boxes (new device ids, placed by the cluster's
rendezvous hashing; their ids are chosen so that it spreads them round robin, box i on member
i mod M, so the line measures the members' budgets, not the hash's luck with a few ids: the
spread seen is printed) and at least `--turns` questions. Printed
per round: p50/p95/max, the CPU each member used (cores, from /proc), the time its quota
throttled it and the seconds its threads were runnable but not running (summed over threads:
the quota's throttling and the machine's other work together; a quota is a ceiling, not a
reservation), the bench process's own CPU (the boxes) and the load average.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import random
import resource
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from gateway.audio.pcm import int16_to_float, resample
from gateway.cli.bench_capacity import QUESTIONS, SEED, conversation_plans, percentile
from gateway.cli.capacity_box import RATE, Box
from gateway.cli.cgroup_quota import (CgroupUnavailable, CpuController, CpuGroup, cpu_controller, process_cpu_s,
                                      process_waiting_s)
from gateway.cli.cluster_rig import ClusterRig
from gateway.cli.cluster_voice_box import ClusterVoiceBox
from gateway.cluster.rendezvous import owner

DEADLINE_FACTOR = 1.5  # bench-capacity's: p95 within 1.5x of one box's
SETTLE_S = 5.0  # after a member joins: > 2 heartbeats (2 s), so every member places with it


@dataclass
class MqttBox(Box):
    """bench-capacity's box in conversation, over a cluster voice box's MQTT frames (welcomed)."""

    frames: Any = None

    async def run(self, plan: list[tuple[float, str, np.ndarray]], timeout: float = 60.0) -> None:
        receiver = asyncio.create_task(self._receive(self.frames))
        try:
            await self._talk(self.frames, plan, timeout)
        finally:
            receiver.cancel()
            await asyncio.gather(receiver, return_exceptions=True)


def questions(fake: bool, cfg: Any, say) -> list[tuple[str, np.ndarray]]:
    """The spoken questions at 16 kHz: the local TTS's voice (the fake TTS's tone code with `fake`)."""
    if fake:
        from gateway.engines.fake import FakeTts

        tts: Any = FakeTts()
    else:
        from gateway.engines.factory import load_tts
        from gateway.engines.store import ModelStore

        tts = load_tts(cfg, ModelStore(cfg), say)
    spoken = []
    for q in QUESTIONS:
        chunks = list(tts.synthesize(q))
        audio = np.concatenate([int16_to_float(c.pcm) for c in chunks])
        spoken.append((q, resample(audio, chunks[0].sample_rate, RATE)))
    return spoken


def _own_cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def balanced_ids(tag: str, n: int, members: list[str]) -> list[str]:
    """`n` device ids that the cluster's rendezvous hashing places round robin over `members` (box
    i on member i mod M), so that a round measures the members' capacity, not the hash's luck."""
    ids: list[str] = []
    k = 0
    for i in range(n):
        while owner(candidate := f"vox-{tag}-{k:03d}", members) != members[i % len(members)]:
            k += 1
        ids.append(candidate)
        k += 1
    return ids


async def _round(rig: ClusterRig, groups: dict[str, CpuGroup], tag: str, n: int, spoken, turns: int, spread_s: float,
                 rng: random.Random) -> dict[str, Any]:
    voices = [ClusterVoiceBox(d, prefix=rig.prefix) for d in balanced_ids(tag, n, sorted(groups))]
    try:
        await asyncio.gather(*(v.connect("127.0.0.1", rig.broker_port) for v in voices))
        await asyncio.gather(*(v.welcomed(timeout=30) for v in voices))
        now = time.monotonic()
        spread = {m: 0 for m in groups}
        for v in voices:
            holder = rig.observer.holder_at(v.device_id, now)
            spread[holder or "?"] = spread.get(holder or "?", 0) + 1
        per_box = max(2, math.ceil(turns / n))
        boxes = [MqttBox(f"mqtt://127.0.0.1:{rig.broker_port}", v.device_id, frames=v.frames) for v in voices]
        cpu0 = {m: process_cpu_s(rig.members[m].pid) for m in groups}
        thr0 = {m: g.throttled_s() for m, g in groups.items()}
        wait0 = {m: process_waiting_s(rig.members[m].pid) for m in groups}
        own0, wall0, load0 = _own_cpu_s(), time.monotonic(), os.getloadavg()[0]
        results = await asyncio.gather(*(b.run(p) for b, p in zip(boxes, conversation_plans(
            n, spoken, per_box, spread_s, rng))), return_exceptions=True)
        wall = time.monotonic() - wall0
        cpu = {m: round((process_cpu_s(rig.members[m].pid) - cpu0[m]) / wall, 2) for m in groups}
        throttled = {m: round(g.throttled_s() - thr0[m], 1) for m, g in groups.items()}
        waiting = {m: round(process_waiting_s(rig.members[m].pid) - wait0[m], 1) for m in groups}
        own = round((_own_cpu_s() - own0) / wall, 2)
    finally:
        await asyncio.gather(*(v.close() for v in voices), return_exceptions=True)
    all_turns = [t for b in boxes for t in b.turns]
    lat = [t.latency_ms for t in all_turns if t.latency_ms is not None]
    failed = [str(r) for r in results if isinstance(r, BaseException)] + [t.error for t in all_turns if t.error]
    return {"boxes": n, "turns": len(all_turns), "answered": len(lat),
            "p50_ms": round(percentile(lat, 0.5)) if lat else None,
            "p95_ms": round(percentile(lat, 0.95)) if lat else None,
            "max_ms": round(max(lat)) if lat else None,
            "spread": spread, "member_cores": cpu, "member_throttled_s": throttled,
            "member_waiting_s": waiting, "bench_cores": own,
            "seconds": round(wall), "load": f"{load0:.1f}-{os.getloadavg()[0]:.1f}",
            "failed": len(failed), "failures": failed[:5]}


async def _line(args: argparse.Namespace, dsn: str, controller: CpuController, spoken, root: Path, say) -> dict[str, Any]:
    rig = ClusterRig(root, dsn)
    rig.start_broker()
    groups: dict[str, CpuGroup] = {}
    rng = random.Random(SEED)
    deadline_ms: float | None = None
    line: list[dict[str, Any]] = []
    try:
        await rig.observe()
        for m in sorted(args.gateways):
            new = [f"gw-{chr(ord('a') + i)}" for i in range(m) if f"gw-{chr(ord('a') + i)}" not in groups]
            say(f"M={m}: starting {', '.join(new)} ({'fake engines' if args.fake_engines else 'real models'})")
            await rig.start_members(new, {g: {"real_models": not args.fake_engines} for g in new})
            for member in new:  # the budget starts once the models are loaded
                groups[member] = controller.group(f"gateway-bench-{os.getpid()}-{member}", args.member_cpu,
                                                   args.member_weight)
                groups[member].add(rig.members[member].pid)
            await asyncio.sleep(SETTLE_S)
            step = args.step or m
            rounds: list[dict[str, Any]] = []
            n = 1 if deadline_ms is None else m
            while n <= args.max_boxes * m:
                turns = args.turns if deadline_ms is not None else args.reference_turns
                row = await _round(rig, groups, f"m{m}n{n}", n, spoken, turns, args.spread, rng)
                if deadline_ms is None:  # one box on one member: the reference
                    if row["p95_ms"] is None or row["failed"]:
                        raise RuntimeError(f"the reference round (1 box, 1 member) failed: {row['failures']}")
                    deadline_ms = DEADLINE_FACTOR * row["p95_ms"]
                row["within"] = row["failed"] == 0 and row["p95_ms"] is not None and row["p95_ms"] <= deadline_ms
                say(json.dumps(row))
                rounds.append(row)
                if not row["within"]:
                    break
                n += step
            held = [r["boxes"] for r in rounds if r["within"]]
            line.append({"gateways": m, "boxes_at_deadline": max(held, default=0),
                         "stopped_by": None if not rounds or rounds[-1]["within"] else rounds[-1]["boxes"],
                         "rounds": rounds})
    finally:
        await rig.stop()
        for group in groups.values():
            for _ in range(50):  # the members' processes have just ended
                try:
                    group.remove()
                    break
                except CgroupUnavailable:
                    await asyncio.sleep(0.2)
    return {"member_cpu": args.member_cpu, "member_weight": args.member_weight, "deadline_ms": round(deadline_ms) if deadline_ms else None,
            "engines": "fake" if args.fake_engines else "real", "line": line,
            "overlapping_leases": len(rig.observer.overlaps())}


def measure(args: argparse.Namespace, cfg: Any, dsn: str, say) -> dict[str, Any]:
    """The line; raises CgroupUnavailable (why) before starting anything where quotas cannot be set."""
    controller = cpu_controller()
    if 1 not in args.gateways:
        raise SystemExit("error: --voice needs 1 among --gateways (one box on one member is the reference)")
    spoken = questions(args.fake_engines, cfg, say)
    load0 = os.getloadavg()
    if args.keep is not None:
        root = args.keep / f"voice-{int(time.time())}"
        root.mkdir(parents=True)
        report = asyncio.run(_line(args, dsn, controller, spoken, root, say))
    else:
        with tempfile.TemporaryDirectory(prefix="bench-cluster-voice-") as tmp:
            report = asyncio.run(_line(args, dsn, controller, spoken, Path(tmp), say))
    return {**report, "load_before": [round(x, 1) for x in load0], "load_after": [round(x, 1) for x in os.getloadavg()],
            "cgroup": f"v{controller.version} {controller.root}"}


def print_line(r: dict[str, Any]) -> None:
    print(f"voice line: members each limited to {r['member_cpu']} cores at {r['member_weight']}x the default CPU "
          f"weight ({r['cgroup']}), {r['engines']} engines; "
          f"deadline p95 <= {r['deadline_ms']} ms (1.5x one box on one member); load average "
          + "%.1f %.1f %.1f before, " % tuple(r["load_before"]) + "%.1f %.1f %.1f after" % tuple(r["load_after"]))
    print(f"{'M':>2} {'N':>3} {'turns':>5} {'p50':>6} {'p95':>6} {'max':>6} {'fail':>4}  spread / member cores "
          "(s throttled by the quota / thread-s runnable, not running) / bench cores / load")
    for g in r["line"]:
        for row in g["rounds"]:
            members = ", ".join(f"{m} {row['spread'].get(m, 0)} box {c:.2f} ({row['member_throttled_s'][m]}/"
                                f"{row['member_waiting_s'][m]})" for m, c in row["member_cores"].items())
            print(f"{g['gateways']:>2} {row['boxes']:>3} {row['turns']:>5} {row['p50_ms'] or '-':>6} "
                  f"{row['p95_ms'] or '-':>6} {row['max_ms'] or '-':>6} {row['failed']:>4}  {members}; bench "
                  f"{row['bench_cores']:.2f}; {row['load']}{'' if row['within'] else '  <- past the deadline'}")
    print("boxes at the deadline: " + ", ".join(
        f"{g['gateways']} gateway(s) {g['boxes_at_deadline']} ({g['boxes_at_deadline'] / g['gateways']:.1f} per gateway)"
        for g in r["line"]) + f"; overlapping leases {r['overlapping_leases']}")


def run_voice(args: argparse.Namespace, cfg: Any) -> int:
    def say(line: str) -> None:
        print(f"  {line}", file=sys.stderr, flush=True)

    dsn = os.environ.get(args.dsn_env, "").strip()
    if not dsn:
        raise SystemExit(f"error: set {args.dsn_env} to a PostgreSQL DSN (a database the benchmark may write to)")
    try:
        report = measure(args, cfg, dsn, say)
    except CgroupUnavailable as exc:
        print(f"error: {exc}; --voice needs CPU quotas to give each member a fixed budget", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(report))
    else:
        print_line(report)
    return 0
