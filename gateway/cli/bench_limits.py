"""`gateway bench-limits`: the WebSocket link under abuse, measured from outside the gateway process.

A gateway process (gateway/cli/limits_target.py: the links and limits of `gateway run`, the real
Silero VAD cloned per session, the fake ASR/TTS, a throw-away database) serves one steady device
on 127.0.0.1 that pings every 20 ms while an attacker on 127.0.0.2 floods it:

- `hellos`: 100 parallel Hellos, 5 rounds (limits raised so all 100 get a session and a VAD clone);
- `connections`: 1,000 connections that each send a Hello, with the default limits (the rest
  are refused too-many-sessions); the gateway's RSS before and after (VmRSS of the process);
- `fds`: the gateway at RLIMIT_NOFILE 128 and twice as many TCP connections that never start
  the handshake, held for 25 s: accept-failed log lines (one per 10 s) and tracebacks, the steady
  device's ping meanwhile, how soon a new device is welcomed once they close;
- `guesses`: wrong-token Hellos for a registered device, one connection each, back to back for
  a few seconds: attempts/s and guesses/s that get their token checked (auth-failed) through
  the login throttle.

It prints ping p50/p95/max per phase (the machine's load average beside them). The steady device's
and the attacker's clients: gateway/cli/limits_clients.py.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from websockets.asyncio.client import ClientConnection

from gateway.cli.limits_clients import Pinger, attempt, count, figures, settle, welcomed
from gateway.cli.limits_target import started
from gateway.devices.auth import add_device
from gateway.devices.database import Database
from gateway.links.limits import raise_fd_limit

async def _phase_hellos(db_dir: Path, n: int, rounds: int, fake_vad: bool) -> dict[str, Any]:
    overrides = {"server": {"max_sessions": n + 10, "max_sessions_per_peer": n + 10},
                 "devices": {"database": str(db_dir / "hellos.db")}, "fake_vad": fake_vad}
    with started(overrides) as gw:
        box = await welcomed(gw.url, "box-steady")
        pinger = Pinger(box)
        quiet = await settle(pinger, 1.0)
        rss_before = gw.rss_mb()
        during, answers, took, rss_after = [], [], [], 0.0
        for r in range(rounds):  # the flood lasts well under a second: a few rounds for more pings
            t0 = time.perf_counter()
            results = await asyncio.gather(*(attempt(gw.url, f"flood-{r}-{i}") for i in range(n)))
            took.append(time.perf_counter() - t0)
            during += pinger.take()
            answers += [a for _, a in results]
            rss_after = max(rss_after, gw.rss_mb())
            for ws, _ in results:
                if ws is not None:
                    await ws.close()
            await settle(pinger, 1.0)
        await pinger.stop()
        await box.close()
    return {"hellos": n, "rounds": rounds, "vad": "fake" if fake_vad else "silero", "answers": count(answers),
            "all_answered_s": round(statistics.median(took), 2),
            "ping_quiet": figures(quiet), "ping_during": figures(during),
            "rss_before_mb": round(rss_before, 1), "rss_after_mb": round(rss_after, 1)}


async def _phase_connections(db_dir: Path, n: int) -> dict[str, Any]:
    with started({"devices": {"database": str(db_dir / "connections.db")}}) as gw:  # the default limits
        box = await welcomed(gw.url, "box-steady")
        pinger = Pinger(box)
        quiet = await settle(pinger, 1.0)
        rss_before = gw.rss_mb()
        sem = asyncio.Semaphore(200)  # at most 200 handshakes in flight from this process

        async def one(i: int) -> tuple[ClientConnection | None, str]:
            async with sem:
                return await attempt(gw.url, f"conn-{i}")

        results = await asyncio.gather(*(one(i) for i in range(n)))
        during = pinger.take()
        held = await settle(pinger, 2.0)  # the admitted attackers stay connected
        rss_after = gw.rss_mb()
        refusal_lines = sum("too-many-sessions" in line for line in gw.log)
        await pinger.stop()
        for ws, _ in results:
            if ws is not None:
                await ws.close()
        await box.close()
    return {"connections": n, "answers": count([a for _, a in results]), "ping_quiet": figures(quiet),
            "ping_during": figures(during), "ping_after_held": figures(held),
            "rss_before_mb": round(rss_before, 1), "rss_after_mb": round(rss_after, 1),
            "refusal_log_lines": refusal_lines}


async def _phase_guesses(db_dir: Path, seconds: float) -> dict[str, Any]:
    path = db_dir / "guesses.db"
    db = Database(path)
    await db.run(add_device, "box-reg", "")
    db.close()
    with started({"devices": {"database": str(path), "open_enrolment": False}}) as gw:
        answers: list[str] = []
        t0 = time.perf_counter()
        i = 0
        while time.perf_counter() - t0 < seconds:
            ws, answer = await attempt(gw.url, "box-reg", f"guess-{i}")
            answers.append(answer)
            i += 1
            if ws is not None:
                await ws.close()
        took = time.perf_counter() - t0
    counted = count(answers)
    return {"seconds": round(took, 2), "attempts": len(answers), "attempts_per_s": round(len(answers) / took, 1),
            "checked": counted.get("auth-failed", 0), "guesses_per_s": round(counted.get("auth-failed", 0) / took, 2),
            "answers": counted}


async def _phase_fds(db_dir: Path, nofile: int, hold_s: float) -> dict[str, Any]:
    with started({"devices": {"database": str(db_dir / "fds.db")}, "fake_vad": True}, nofile=nofile) as gw:
        box = await welcomed(gw.url, "box-steady")
        pinger = Pinger(box)
        quiet = await settle(pinger, 1.0)
        attack = []
        for _ in range(nofile * 2):  # handshake-less TCP connections: each accepted one holds a descriptor
            s = socket.socket()
            s.setblocking(False)
            s.connect_ex(("127.0.0.1", gw.port))
            attack.append(s)
        during = await settle(pinger, hold_s)
        failed = [line for line in gw.log if "accept-failed" in line]
        tracebacks = sum("Traceback" in line for line in gw.log)
        for s in attack:
            s.close()
        t0 = time.perf_counter()
        newcomer = await welcomed(gw.url, "box-after")
        back_in_s = time.perf_counter() - t0
        await newcomer.close()
        await pinger.stop()
        await box.close()
    return {"nofile": nofile, "held_s": hold_s, "attack_connections": len(attack), "accept_failed_lines": len(failed),
            "tracebacks": tracebacks, "ping_quiet": figures(quiet), "ping_exhausted": figures(during),
            "new_device_welcomed_after_s": round(back_in_s, 2)}


async def _bench(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {"load_before": os.getloadavg()}
    with tempfile.TemporaryDirectory(prefix="bench-limits-") as tmp:
        if "hellos" in args.phases:
            out["hellos"] = await _phase_hellos(Path(tmp), args.hellos, args.rounds, args.fake_vad)
        if "connections" in args.phases:
            out["connections"] = await _phase_connections(Path(tmp), args.connections)
        if "fds" in args.phases:
            out["fds"] = await _phase_fds(Path(tmp), args.nofile, args.fd_hold_s)
        if "guesses" in args.phases:
            out["guesses"] = await _phase_guesses(Path(tmp), args.guess_seconds)
    out["load_after"] = os.getloadavg()
    return out


def _print(f: dict[str, Any]) -> None:
    def ping(p: dict[str, float]) -> str:
        return f"p50 {p['p50_ms']:.1f} ms, p95 {p['p95_ms']:.1f} ms, max {p['max_ms']:.1f} ms ({p['pings']} pings)"

    print("load average before: %.2f %.2f %.2f" % tuple(f["load_before"]))
    if h := f.get("hellos"):
        print(f"{h['hellos']} parallel Hellos x {h['rounds']} rounds ({h['vad']} VAD cloned per session): answers "
              f"{h['answers']}, all of a round answered in {h['all_answered_s']} s (median)")
        print(f"  steady device ping, quiet:   {ping(h['ping_quiet'])}")
        print(f"  steady device ping, flooded: {ping(h['ping_during'])}")
        print(f"  gateway RSS {h['rss_before_mb']} -> {h['rss_after_mb']} MB (highest with {h['hellos']} sessions)")
    if c := f.get("connections"):
        print(f"{c['connections']} connections with a Hello (default limits): answers {c['answers']}, "
              f"{c['refusal_log_lines']} refusal log lines")
        print(f"  steady device ping, quiet:      {ping(c['ping_quiet'])}")
        print(f"  steady device ping, flooded:    {ping(c['ping_during'])}")
        print(f"  steady device ping, while held: {ping(c['ping_after_held'])}")
        print(f"  gateway RSS {c['rss_before_mb']} -> {c['rss_after_mb']} MB")
    if d := f.get("fds"):
        print(f"file descriptors exhausted (RLIMIT_NOFILE {d['nofile']}, {d['attack_connections']} connections held "
              f"{d['held_s']} s): {d['accept_failed_lines']} accept-failed log lines, {d['tracebacks']} tracebacks")
        print(f"  steady device ping, quiet:     {ping(d['ping_quiet'])}")
        print(f"  steady device ping, exhausted: {ping(d['ping_exhausted'])}")
        print(f"  after the attacker closed: a new device welcomed in {d['new_device_welcomed_after_s']} s")
    if g := f.get("guesses"):
        print(f"wrong-token guesses for {g['seconds']} s: {g['attempts']} attempts ({g['attempts_per_s']}/s), "
              f"{g['checked']} checked = {g['guesses_per_s']} guesses/s through the throttle; answers {g['answers']}")
    print("load average after: %.2f %.2f %.2f" % tuple(f["load_after"]))


def run(args: argparse.Namespace, cfg: Any = None) -> int:
    raise_fd_limit()  # this process holds the attacker's 1,000 connections
    results = asyncio.run(_bench(args))
    if args.json:
        print(json.dumps(results))
    else:
        _print(results)
    return 0


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    bl = sub.add_parser("bench-limits", parents=[common], help="a device's ping round trip while the WebSocket link "
                        "is flooded (parallel Hellos, 1,000 connections), RSS, wrong-token guesses per second",
                        description="Starts a gateway in another process and floods its WebSocket link from "
                        "outside (parallel Hellos, 1,000 connections, exhausted file descriptors, wrong tokens): "
                        "a steady device's ping p50/p95 meanwhile, the gateway's RSS, guesses per second checked.")
    bl.add_argument("--phases", nargs="+", choices=("hellos", "connections", "fds", "guesses"),
                    default=["hellos", "connections", "fds", "guesses"], help="what to measure (default: all)")
    bl.add_argument("--hellos", type=int, default=100, help="parallel Hellos (default 100)")
    bl.add_argument("--rounds", type=int, default=5, help="rounds of parallel Hellos (default 5)")
    bl.add_argument("--fake-vad", action="store_true", help="hellos: the fake VAD (no clone cost), for comparison")
    bl.add_argument("--connections", type=int, default=1000, help="flood connections (default 1000)")
    bl.add_argument("--nofile", type=int, default=128, help="fds: the gateway's RLIMIT_NOFILE (default 128)")
    bl.add_argument("--fd-hold-s", type=float, default=25.0, help="fds: how long the descriptors stay exhausted "
                    "(default 25 s: accept errors are logged once per 10 s)")
    bl.add_argument("--guess-seconds", type=float, default=5.0, help="how long to guess tokens (default 5 s)")
    bl.add_argument("--json", action="store_true", help="print the figures as JSON")
    bl.set_defaults(func=run)
