"""`gateway bench-capacity`: how many voice boxes in conversation this machine serves at once.

An in-process gateway on a loopback WebSocket (the models `gateway run` loads, the local brain) and
N virtual boxes in real use: each stays connected and streams its microphone in real time (speech,
then silence, as an always-listening box does); it asks a question (2-4 s of speech from the local
TTS), hears the whole reply, pauses a random 3-8 s (seeded) and asks again; the boxes' first
questions start spread over the first seconds. Per N it prints p50/p95 of end of input -> first
reply audio (measured by the box: its question's last sample sent -> the first reply audio
received, the 500 ms endpoint silence included), the gateway's own endpoint -> first audio, the
transcripts' WER against the question text, the process CPU (gateway and boxes: one process), the
main thread's share of it (`loop%`: the event loop's Python work, gateway and boxes, which holds
the GIL: near 100% it, not the cores, is what the turns wait for), the process CPU per question
answered (`CPU s/turn`: times the turn rate, what N boxes need of the cores), split by thread
(the engines' pools, the loop where the boxes run too, onnxruntime's own threads:
gateway/cli/bench_capacity_threads.py) and RSS, and the speculative decodes and TTS calls thrown away,
the worker CPU they cost and the decoder steps the decodes' early stop saved
(gateway/cli/bench_capacity_cancels.py). Capacity = the largest
N whose p95 stays within 1.5x of N=1's. Then, separately, the worst
case: N boxes whose questions end at the same instant.
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
import time
from typing import Any

import numpy as np

from gateway.app import Gateway, load_runner
from gateway.audio.pcm import resample
from gateway.cli.bench_capacity_cancels import StoppedDecodes, cancels_line, cancels_row, mark
from gateway.cli.bench_capacity_threads import GROUPS, cpu_by_group, thread_cpu
from gateway.cli.bench_voice import _synth, gateway_rss_mb, turn_metrics
from gateway.cli.capacity_box import RATE, Box, word_errors
from gateway.config import GatewayConfig
from gateway.engines.runner import EngineRunner
from gateway.links.websocket import WebSocketLink

SEED = 18
QUESTIONS = [
    "Can you tell me what time it is right now?",
    "Hello there, how are you doing this morning?",
    "What is the date today, if you know it?",
    "Thank you very much for your help today.",
    "Could you please tell me the time right now?",
    "Good morning, what day of the week is it?",
    "What is your name, and what can you do?",
    "Tell me the date and the time, please.",
]


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def _cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _loop_cpu_s() -> float:
    """CPU time of the main thread (the event loop: the gateway's and the boxes' Python work, which
    holds the GIL) from /proc; the engines' threads are the rest of the process CPU."""
    pid = os.getpid()
    with open(f"/proc/{pid}/task/{pid}/stat", encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _cache_counts(runner: EngineRunner) -> tuple[int, int]:
    cache = runner.tts_cache
    return (cache.hits, cache.misses) if cache is not None else (0, 0)


def _waits(runner: EngineRunner) -> tuple[int, int]:
    """Calls that waited for a worker so far (asr, tts)."""
    return runner.asr_admission.waited, runner.tts_admission.waited


def _load() -> float:
    with open("/proc/loadavg", encoding="ascii") as f:
        return float(f.read().split()[0])


async def _round(url: str, tag: str, plans: list[list[tuple[float, str, np.ndarray]]], metrics, runner: EngineRunner) -> dict:
    before = len(metrics())
    waits0 = _waits(runner)
    cache0 = _cache_counts(runner)
    boxes = [Box(url, f"cap-{tag}-{i}") for i in range(len(plans))]
    threads0 = thread_cpu()
    cpu0, loop0, wall0, load0 = _cpu_s(), _loop_cpu_s(), time.monotonic(), _load()
    results = await asyncio.gather(*(b.run(p) for b, p in zip(boxes, plans)), return_exceptions=True)
    cpu, loop_cpu, wall = _cpu_s() - cpu0, _loop_cpu_s() - loop0, time.monotonic() - wall0
    by_group = cpu_by_group(threads0, thread_cpu(), cpu)
    turns = [t for b in boxes for t in b.turns]
    lat = [t.latency_ms for t in turns if t.latency_ms is not None]
    errors, words = map(sum, zip(*(word_errors(t.question, t.transcript) for t in turns))) if turns else (0, 0)
    done = metrics()[before:]
    gateway_side = [m.endpoint_to_first_audio_ms for m in done if m.endpoint_to_first_audio_ms]
    asr = [m.asr_after_endpoint_ms for m in done]
    tts = [m.first_tts_ms for m in done if m.first_tts_ms]
    failed = [str(r) for r in results if isinstance(r, BaseException)] + [t.error for t in turns if t.error]
    cache = _cache_counts(runner)
    return {"boxes": len(plans), "turns": len(turns), "answered": len(lat),
            "p50_ms": round(percentile(lat, 0.5)), "p95_ms": round(percentile(lat, 0.95)),
            "max_ms": round(max(lat)) if lat else None,
            "gateway_p50_ms": round(percentile(gateway_side, 0.5)), "gateway_p95_ms": round(percentile(gateway_side, 0.95)),
            "asr_after_endpoint_p95_ms": round(percentile(asr, 0.95)), "first_tts_p95_ms": round(percentile(tts, 0.95)),
            "replies": sorted({m.reply[:60] for m in done}),
            "wer": round(errors / words, 3) if words else None,
            "waited": [b - a for a, b in zip(waits0, _waits(runner))],  # asr, tts calls that waited for a worker
            # texts answered from the TTS cache (tts.cache_seconds), and texts looked up in it
            "tts_cache_hits": cache[0] - cache0[0], "tts_cache_lookups": sum(cache) - sum(cache0),
            "cpu_pct": round(100 * cpu / wall), "loop_cpu_pct": round(100 * loop_cpu / wall),
            # process CPU (gateway and boxes) per question answered: what a turn costs the machine
            "cpu_s_per_turn": round(cpu / len(lat), 2) if lat else None,
            # the same split by thread (bench_capacity_threads.py): the boxes run only on the loop
            "cpu_s_per_turn_by_thread": {g: round(by_group[g] / len(lat), 3) for g in GROUPS} if lat else None,
            "rss_mb": None,  # the caller's: the gateway's and its readings' writer's
            "load": f"{load0:.1f}-{_load():.1f}", "failures": failed[:5], "failed": len(failed)}


def conversation_plans(n: int, questions: list[tuple[str, np.ndarray]], turns_per_box: int, spread_s: float,
                       rng: random.Random) -> list[list[tuple[float, str, np.ndarray]]]:
    """Each box's first question starts within `spread_s`; each later one 3-8 s after the reply."""
    now = time.monotonic() + 1.0
    plans = []
    for b in range(n):
        plan = [(now + rng.uniform(0, spread_s) if k == 0 else rng.uniform(3.0, 8.0), *questions[(b + k) % len(questions)])
                for k in range(turns_per_box)]
        plans.append(plan)
    return plans


def simultaneous_plans(n: int, questions: list[tuple[str, np.ndarray]]) -> list[list[tuple[float, str, np.ndarray]]]:
    """N boxes whose questions end at the same instant."""
    end = time.monotonic() + 2.0 + max(len(a) for _, a in questions) / RATE
    return [[(end - len(a) / RATE, q, a)] for q, a in (questions[i % len(questions)] for i in range(n))]


async def _run(cfg: GatewayConfig, sizes: list[int], min_turns: int, spread_s: float, say) -> dict:
    say("loading models")
    runner = load_runner(cfg, say)
    runner.asr = asr = StoppedDecodes(runner.asr)  # counts the thrown-away decodes
    questions = []
    for q in QUESTIONS:
        audio, rate, _ = _synth(runner, q)
        audio = resample(audio, rate, RATE)
        questions.append((q, audio))
        if not 2.0 <= len(audio) / RATE <= 4.0:
            say(f"note: {q!r} is {len(audio) / RATE:.1f} s of speech")
    link = WebSocketLink("127.0.0.1", 0, cfg.server.websocket_path, cfg.server.max_frame_bytes)
    gateway = Gateway(cfg, runner, [link])
    metrics = turn_metrics(gateway.bus)
    ready = asyncio.Event()
    server = asyncio.create_task(gateway.serve(ready))
    await ready.wait()
    url = f"ws://127.0.0.1:{link.port}{cfg.server.websocket_path}"
    rng = random.Random(SEED)
    conversation, simultaneous = [], []
    try:
        for n in sizes:
            per_box = max(2, math.ceil(min_turns / n))
            say(f"N={n}: {n} boxes x {per_box} questions, starts spread over {spread_s:.0f} s")
            start = mark(runner, asr)
            row = await _round(url, f"c{n}", conversation_plans(n, questions, per_box, spread_s, rng), metrics, runner)
            row["rss_mb"] = round(gateway_rss_mb(gateway))
            row.update(cancels_row(runner, asr, start))
            say(json.dumps(row))
            conversation.append(row)
        for n in sizes:
            say(f"N={n} questions ending at the same instant")
            start = mark(runner, asr)
            row = await _round(url, f"s{n}", simultaneous_plans(n, questions), metrics, runner)
            row["rss_mb"] = round(gateway_rss_mb(gateway))
            row.update(cancels_row(runner, asr, start))
            say(json.dumps(row))
            simultaneous.append(row)
    finally:
        server.cancel()
        await asyncio.gather(server, return_exceptions=True)
        runner.close()
    base = conversation[0]["p95_ms"] if conversation and conversation[0]["boxes"] == 1 else None
    capacity = max((r["boxes"] for r in conversation if base and r["failed"] == 0 and r["p95_ms"] <= 1.5 * base),
                   default=0)
    return {"conversation": conversation, "simultaneous": simultaneous, "capacity": capacity,
            "deadline_ms": round(1.5 * base) if base else None}


def print_report(report: dict) -> None:
    head = (f"{'N':>3} {'turns':>5} {'p50':>6} {'p95':>6} {'max':>6} {'gw p95':>6} {'WER':>5} {'CPU%':>5} {'loop%':>5} "
            f"{'CPU s/turn':>10} {'RSS MB':>6} {'fail':>4}  load")
    for title, rows in (("conversation (end of input -> first reply audio, ms)", report["conversation"]),
                        ("questions ending at the same instant", report["simultaneous"])):
        print(f"\n{title}\n{head}")
        for r in rows:
            print(f"{r['boxes']:>3} {r['turns']:>5} {r['p50_ms']:>6} {r['p95_ms']:>6} {r['max_ms'] or '-':>6} "
                  f"{r['gateway_p95_ms']:>6} {r['wer'] if r['wer'] is not None else '-':>5} {r['cpu_pct']:>5} "
                  f"{r['loop_cpu_pct']:>5} {r['cpu_s_per_turn'] or '-':>10} "
                  f"{r['rss_mb']:>6} {r['failed']:>4}  {r['load']}")
        for r in rows:
            if split := r.get("cpu_s_per_turn_by_thread"):
                print(f"{r['boxes']:>3} CPU s/turn by thread: " + ", ".join(f"{g} {split[g]:.3f}" for g in GROUPS)
                      + " (the boxes run on the loop; onnxruntime's own pool threads are in other)")
        for r in rows:
            if "asr_thrown_away" in r:
                print(cancels_line(r))
        for r in rows:
            if r.get("tts_cache_lookups"):
                print(f"{r['boxes']:>3} TTS texts answered from the cache: {r['tts_cache_hits']} of {r['tts_cache_lookups']}")
    print(f"\ncapacity: {report['capacity']} boxes (p95 within 1.5x of N=1: <= {report['deadline_ms']} ms)")


def run(args: argparse.Namespace, cfg: GatewayConfig) -> int:
    def say(line: str) -> None:
        print(f"  {line}", file=sys.stderr, flush=True)

    sizes = args.sizes or ([1, 2, 4, 8, 16, 24, 32] if args.large else [1, 2, 4, 8, 16])
    if args.tts_cache_seconds is not None:
        cfg = cfg.model_copy(update={"tts": cfg.tts.model_copy(update={"cache_seconds": args.tts_cache_seconds})})
    report = asyncio.run(_run(cfg, sizes, args.turns, args.spread, say))
    print(json.dumps(report, indent=2) if args.json else "", end="" if not args.json else "\n")
    if not args.json:
        print_report(report)
    return 0


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("bench-capacity", parents=[common],
                       help="how many voice boxes in conversation at once: p50/p95 first reply audio, WER, CPU, RSS per N",
                       description="A gateway with the real models and N virtual voice boxes in conversation at "
                       "once, for each N of --sizes: p50/p95 end of input -> first reply audio, WER, CPU (per turn, "
                       "per thread) and RSS, and the most boxes this machine serves within the latency goal.")
    p.add_argument("--sizes", type=int, nargs="+", metavar="N", help="numbers of boxes (default 1 2 4 8 16)")
    p.add_argument("--large", action="store_true", help="also 24 and 32 boxes")
    p.add_argument("--turns", type=int, default=12, help="at least this many questions per N (default 12)")
    p.add_argument("--spread", type=float, default=4.0, help="first questions start within this many seconds (default 4)")
    p.add_argument("--tts-cache-seconds", type=float, metavar="S",
                   help="tts.cache_seconds for this run (0: every reply synthesized, the compute bound; the "
                        "local brain's replies to the benchmark's questions repeat, so the cache answers most)")
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    p.set_defaults(func=run)
