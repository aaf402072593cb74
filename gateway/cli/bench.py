"""`gateway bench`: the voice loop's latency figures (gateway/cli/bench_voice.py), or with `--llm` the
same path answered by an LLM (gateway/cli/bench_llm.py), with `--xiaozhi` a xiaozhi box next to the
own protocol (gateway/cli/bench_xiaozhi.py)."""

from __future__ import annotations

import argparse
from typing import Any

from gateway.config import GatewayConfig


def run(args: argparse.Namespace, cfg: GatewayConfig) -> int:
    if args.llm:
        from gateway.cli.bench_llm import run_bench_llm

        if args.no_speculate:  # for comparison: the brain is asked only after the endpoint
            cfg = cfg.model_copy(update={"brain": cfg.brain.model_copy(update={"speculate": False})})
        return run_bench_llm(cfg, args.utterances, args.llm_first_sentence_ms, args.json)

    if args.xiaozhi:
        from gateway.cli.bench_xiaozhi import run_bench_xiaozhi

        return run_bench_xiaozhi(cfg, args.utterances, tuple(args.boxes), args.json)

    if args.rss:
        from gateway.cli.bench_rss import run_bench_rss

        return run_bench_rss(cfg, sessions=args.sessions, speed=args.speed, as_json=args.json)

    from gateway.cli.bench_voice import run_bench

    return run_bench(cfg, utterances=args.utterances, as_json=args.json)


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    bench = sub.add_parser("bench", parents=[common], help="measure latency and real-time factors (prints medians and p95)",
                           description="The voice loop on this machine's real models: end of speech -> first reply "
                           "audio and the engines' real-time factors over --utterances questions (medians, p95). "
                           "--llm, --rss or --xiaozhi measure that instead. Methods: docs/BENCHMARKS.md.")
    bench.add_argument("--utterances", type=int, default=20, help="how many utterances (default 20)")
    bench.add_argument("--json", action="store_true", help="print the figures as JSON")
    bench.add_argument("--llm", action="store_true", help="answer with an LLM brain (a scripted OpenAI-compatible "
                       "server on 127.0.0.1): endpoint -> first reply audio vs the LLM's own first-sentence latency")
    bench.add_argument("--llm-first-sentence-ms", type=float, default=300.0, metavar="MS",
                       help="with --llm: the scripted model's first-sentence latency (default 300)")
    bench.add_argument("--no-speculate", action="store_true",
                       help="with --llm: ask the LLM only after the endpoint (brain.speculate off), for comparison")
    bench.add_argument("--rss", action="store_true", help="resident memory of the gateway `gateway run` serves "
                       "(memory service on): per engine, idle with every model warm, after --sessions sessions")
    bench.add_argument("--sessions", type=int, default=50, help="with --rss: how many voice-box sessions (default 50)")
    bench.add_argument("--speed", type=float, default=2.0, help="with --rss: audio streamed at this many times real time (default 2)")
    bench.add_argument("--xiaozhi", action="store_true", help="a xiaozhi box over its WebSocket with Opus, interleaved "
                       "with the own protocol: end of speech -> first reply frame, Opus CPU, concurrent boxes")
    bench.add_argument("--boxes", type=int, nargs="+", default=[1, 2, 4], metavar="N",
                       help="with --xiaozhi: how many boxes speak at once, per round (default 1 2 4)")
    bench.set_defaults(func=run)
