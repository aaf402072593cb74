"""`gateway bench-cluster`: MQTT devices shared by 1..3 gateways on this machine, with failovers.

For each gateway count it starts a plain mosquitto on loopback (the site's external broker) and
that many member processes (gateway/cli/cluster_target.py: cluster mode, fake voice engines,
readings into the PostgreSQL the DSN in $GATEWAY_PG_DSN names), then `--devices` emulated sensor
boxes (gateway/cli/cluster_box.py) that each send one reading at a time, the next as soon as the
last was acknowledged (every `--every-s`). It measures:

- readings/s acknowledged (and rows/s committed to PostgreSQL) over `--window-s` with every box
  served, and the reading -> ack latency p50/p95;
- with 2+ gateways, `--failovers` times per signal: the member serving the most boxes gets
  SIGKILL (a crash: its socket closes, the broker fires its Will), SIGSTOP (a hang or a pulled
  cable: only the missing heartbeat and the lease expiry tell) or SIGTERM (a clean stop: it
  leaves and releases its leases), and for each of its boxes the
  time from the signal to the Welcome of another member; p50 / p95 / max, against the design's
  8 s, split into signal -> the new holder's hello-required (it has just taken the lease) and
  hello-required -> Welcome (the device's Hello and the session's start). The member is then started again (or continued) and the boxes settle before the next;
- at the end: downlinks sent under overlapping leases (must be 0) and acknowledged readings not
  in PostgreSQL exactly once (must be 0).

The load average is printed beside the figures. `--voice` measures the voice line instead: voice
boxes in conversation served at the latency deadline by 1, 2, 3 members, each member held to a
fixed CPU budget by a cgroup quota (gateway/cli/bench_cluster_voice.py).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import tempfile
import time
from pathlib import Path
from typing import Any

from gateway.cli.bench_stats import percentile
from gateway.cli.cluster_rig import ClusterRig

BOUND_S = 8.0  # docs/SCALE-OUT.md


def _rows(dsn: str) -> int:
    import psycopg  # the postgres extra: imported here so that `gateway` runs without it

    with psycopg.connect(dsn) as conn:
        try:
            return int(conn.execute("SELECT count(*) FROM readings").fetchone()[0])
        except psycopg.errors.UndefinedTable:
            return 0


async def _throughput(rig: ClusterRig, dsn: str, window_s: float) -> dict[str, Any]:
    """Acks counted between two instants, rows between the two counts' answers (each its own span:
    a count may take a while on a busy machine)."""
    acked0, t0 = sum(len(b.acked) for b in rig.boxes), time.monotonic()
    lat0 = {b.device_id: len(b.ack_ms) for b in rig.boxes}
    rows0 = await asyncio.to_thread(_rows, dsn)
    r0 = time.monotonic()
    await asyncio.sleep(window_s)
    acked, took = sum(len(b.acked) for b in rig.boxes) - acked0, time.monotonic() - t0
    rows = await asyncio.to_thread(_rows, dsn) - rows0
    rows_took = time.monotonic() - r0
    lat = [ms for b in rig.boxes for ms in b.ack_ms[lat0[b.device_id]:]]
    return {"readings_per_s": round(acked / took, 1), "rows_per_s": round(rows / rows_took, 1),
            "ack_p50_ms": round(percentile(lat, 0.5), 1), "ack_p95_ms": round(percentile(lat, 0.95), 1)}


async def _failovers(rig: ClusterRig, members: list[str], sig: signal.Signals, count: int) -> dict[str, Any]:
    times: list[float] = []
    leased: list[float] = []  # signal -> the new holder's hello-required (detection + lease expiry + claim)
    hello: list[float] = []  # hello-required -> Welcome (the device's Hello round trip and session start)
    rounds: list[dict[str, Any]] = []
    missing = 0
    for _ in range(count):
        holders = rig.holders()
        victim = max(members, key=lambda m: list(holders.values()).count(m))
        orphans = sorted(d for d, g in holders.items() if g == victim)
        at = rig.kill(victim, sig)
        back = await rig.failover(orphans, at, victim, timeout=3 * BOUND_S)
        times += back.values()
        missing += len(orphans) - len(back)
        asked = [t - at for d in back if (t := rig.observer.first_after(d, at, victim, "error")) is not None]
        leased += asked  # the new holder's hello-required: it has just taken the lease
        hello += [back[d] - (t - at) for d in back if (t := rig.observer.first_after(d, at, victim, "error"))]
        rounds.append({"member": victim, "devices": len(orphans),
                       "seconds": sorted(round(t, 2) for t in back.values()),
                       "lease_taken_s": sorted(round(t, 2) for t in asked)})
        if sig == signal.SIGSTOP:
            rig.kill(victim, signal.SIGCONT)
        else:
            await asyncio.to_thread(rig.members[victim].wait, 10)
            await rig.start_members([victim])
        await rig.wait_all_served(timeout=6 * BOUND_S, readings=2)
    return {"devices_moved": len(times), "not_served_again": missing, "p50_s": round(percentile(times, 0.5), 2),
            "p95_s": round(percentile(times, 0.95), 2), "max_s": round(max(times, default=float("nan")), 2),
            "lease_taken_p50_s": round(percentile(leased, 0.5), 2),
            "lease_taken_max_s": round(max(leased, default=float("nan")), 2),
            "hello_p50_s": round(percentile(hello, 0.5), 2), "hello_max_s": round(max(hello, default=float("nan")), 2),
            "rounds": rounds}


async def _one(n: int, args: argparse.Namespace, dsn: str, root: Path) -> dict[str, Any]:
    rig = ClusterRig(root, dsn)
    rig.start_broker()
    members = [f"gw-{chr(ord('a') + i)}" for i in range(n)]
    out: dict[str, Any] = {"gateways": n, "devices": args.devices, "load_before": os.getloadavg()}
    try:
        await rig.start_members(members)
        await rig.start_boxes(args.devices, every_s=args.every_s, prefix=f"bench{n}-{int(time.time())}")
        await rig.wait_all_served(timeout=6 * BOUND_S, readings=2)
        out["spread"] = {m: list(rig.holders().values()).count(m) for m in members}
        out["throughput"] = await _throughput(rig, dsn, args.window_s)
        if n >= 2:
            for name in args.signals:
                out[f"failover_{name}"] = await _failovers(rig, members, getattr(signal, f"SIG{name.upper()}"),
                                                           args.failovers)
    finally:
        await rig.stop()
    out["overlapping_leases"] = len(rig.observer.overlaps())
    out["overlaps"] = rig.observer.overlaps()[:10]
    import psycopg  # the postgres extra

    with psycopg.connect(dsn) as conn:
        counts = {(d, s): c for d, s, c in conn.execute("SELECT device_id, seq, count(*) FROM readings GROUP BY 1, 2")}
    acked = [(b.device_id, seq) for b in rig.boxes for seq in b.acked]
    out["acked_readings"] = len(acked)
    out["acked_not_exactly_once"] = sum(1 for key in acked if counts.get(key) != 1)
    out["load_after"] = os.getloadavg()
    return out


async def _bench(args: argparse.Namespace) -> list[dict[str, Any]]:
    dsn = os.environ.get(args.dsn_env, "").strip()
    if not dsn:
        raise SystemExit(f"error: set {args.dsn_env} to a PostgreSQL DSN (a database the benchmark may write to)")
    results = []
    for n in args.gateways:
        if args.keep is not None:  # the members' logs and the broker's stay there
            root = args.keep / f"{n}-gateways-{int(time.time())}"
            root.mkdir(parents=True)
            results.append(await _one(n, args, dsn, root))
            continue
        with tempfile.TemporaryDirectory(prefix=f"bench-cluster-{n}-") as tmp:
            results.append(await _one(n, args, dsn, Path(tmp)))
    return results


def _print(results: list[dict[str, Any]]) -> None:
    for r in results:
        t = r["throughput"]
        print(f"{r['gateways']} gateway(s), {r['devices']} devices (load average %.1f %.1f %.1f before)" % tuple(r["load_before"]))
        print(f"  spread: {r['spread']}")
        print(f"  readings: {t['readings_per_s']}/s acknowledged, {t['rows_per_s']} rows/s into PostgreSQL, "
              f"ack p50 {t['ack_p50_ms']} ms, p95 {t['ack_p95_ms']} ms")
        for key in ("failover_kill", "failover_stop", "failover_term"):
            if f := r.get(key):
                print(f"  {key.replace('_', ' (SIG').upper()}): {f['devices_moved']} devices moved, p50 {f['p50_s']} s, "
                      f"p95 {f['p95_s']} s, max {f['max_s']} s (bound {BOUND_S:.0f} s), "
                      f"{f['not_served_again']} not served again")
                print(f"    of which: signal -> lease taken (hello-required) p50 {f['lease_taken_p50_s']} s, max "
                      f"{f['lease_taken_max_s']} s; hello-required -> Welcome p50 {f['hello_p50_s']} s, "
                      f"max {f['hello_max_s']} s")
        print(f"  overlapping leases: {r['overlapping_leases']}; acknowledged readings {r['acked_readings']}, "
              f"not exactly once in PostgreSQL: {r['acked_not_exactly_once']}")
        for overlap in r["overlaps"]:
            print(f"    {overlap}")
        print("  load average after: %.1f %.1f %.1f" % tuple(r["load_after"]))


def run(args: argparse.Namespace, cfg: Any = None) -> int:
    if args.voice:
        from gateway.cli.bench_cluster_voice import run_voice

        return run_voice(args, cfg)
    results = asyncio.run(_bench(args))
    if args.json:
        print(json.dumps(results))
    else:
        _print(results)
    return 0


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    bc = sub.add_parser("bench-cluster", parents=[common], help="MQTT devices shared by 1..3 gateways on this "
                        "machine: readings/s into PostgreSQL, failover p50/p95 after SIGKILL / SIGSTOP",
                        description="Starts 1..3 gateway processes in cluster mode (a loopback mosquitto, the "
                        "PostgreSQL of $GATEWAY_PG_DSN) and emulated MQTT sensor boxes: readings per second, reading "
                        "-> ack latency, failover time after a member is killed or stopped. --voice: voice boxes instead.")
    bc.add_argument("--devices", type=int, default=30, help="emulated MQTT sensor boxes (default 30)")
    bc.add_argument("--gateways", type=int, nargs="+", default=[1, 2, 3], help="gateway counts (default 1 2 3)")
    bc.add_argument("--every-s", type=float, default=0.05, help="pause between a box's ack and its next reading "
                    "(default 0.05)")
    bc.add_argument("--window-s", type=float, default=10.0, help="throughput window (default 10 s)")
    bc.add_argument("--failovers", type=int, default=3, help="failovers per signal with 2+ gateways (default 3)")
    bc.add_argument("--signals", nargs="+", choices=("kill", "stop", "term"), default=["kill", "stop"],
                    help="kill: SIGKILL (a crash), stop: SIGSTOP (a hang), term: SIGTERM (a clean stop); "
                         "default kill stop")
    bc.add_argument("--dsn-env", default="GATEWAY_PG_DSN", help="the variable holding the PostgreSQL DSN")
    bc.add_argument("--keep", type=Path, metavar="DIR", help="keep each run's member logs under DIR")
    bc.add_argument("--json", action="store_true", help="print the figures as JSON")
    voice = bc.add_argument_group("--voice: voice boxes at the latency deadline per gateway count, each member "
                                  "held to a CPU quota (a cgroup: needs root)")
    voice.add_argument("--voice", action="store_true", help="measure the voice line instead of readings and failover")
    voice.add_argument("--member-cpu", type=float, default=0.5, metavar="CORES",
                       help="each member's CPU quota in cores (default 0.5)")
    voice.add_argument("--turns", type=int, default=4, help="at least this many questions per round (default 4)")
    voice.add_argument("--member-weight", type=float, default=4.0, metavar="TIMES",
                       help="each member's CPU weight in times the default (cpu.shares / cpu.weight; default 4: "
                       "a group competes as one process, so at weight 1 a loaded machine keeps it below its quota)")
    voice.add_argument("--reference-turns", type=int, default=8, help="questions of the reference round, one box "
                       "on one member, whose p95 x 1.5 is the deadline (default 8)")
    voice.add_argument("--step", type=int, default=0, help="boxes added per round (default: the member count)")
    voice.add_argument("--max-boxes", type=int, default=8, help="at most this many boxes per member (default 8)")
    voice.add_argument("--spread", type=float, default=4.0, help="first questions start within this many seconds "
                       "(default 4)")
    voice.add_argument("--fake-engines", action="store_true", help="the fake VAD/ASR/TTS in the members (a smoke "
                       "run; the figures need the real models, the default)")
    bc.set_defaults(func=run)
