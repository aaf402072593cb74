"""`gateway memory search|add|recent|export|import|reflect`, `gateway mcp` (MCP over stdio) and `gateway bench-memory`."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from typing import Any

from gateway.cli.progress import progress
from gateway.config import GatewayConfig


async def _with_memory(cfg: GatewayConfig, fn: Any) -> Any:
    from gateway.memory.service import MemoryService

    async with MemoryService.from_config(cfg, progress=progress) as memory:
        return await fn(memory)


def _print(obj: Any) -> None:
    print(json.dumps(obj, ensure_ascii=False, indent=2))


def _cmd_memory(args: argparse.Namespace, cfg: GatewayConfig) -> int:
    from gateway.memory.errors import MemoryError_

    async def run(memory: Any) -> None:
        user = args.user or memory.default_user
        if args.action == "search":
            found = await memory.search(user, args.text, args.n, all_of=args.all or (), any_of=args.any or ())
            _print([r.as_dict() for r in found])
        elif args.action == "add":
            node = await memory.remember(user, args.text, kind=args.kind, source="cli", persistent=args.persistent,
                                         extra_tags=args.tag or ())
            _print(node.as_dict())
        elif args.action == "recent":
            _print([n.as_dict() for n in await memory.recent(user, args.n)])
        elif args.action == "export":
            for node in await memory.export(args.user):
                print(json.dumps(node.as_dict(), ensure_ascii=False))
        elif args.action == "import":
            lines = [json.loads(line) for line in sys.stdin if line.strip()]
            count = await memory.import_nodes(lines, args.user)
            print(f"imported {count} memories", file=sys.stderr)
        elif args.action == "reflect":
            from datetime import datetime

            from gateway.memory.reflection import portrait, reflect

            now = datetime.now().astimezone()
            for u in [args.user] if args.user else await memory.known_users():
                insights = await reflect(memory, u, now)
                print(f"{u}: {len(insights)} insights", file=sys.stderr)
                for node in insights:
                    print(f"  {node.content}")
                print(f"{u}: portrait\n  " + (await portrait(memory, u, now)).replace("\n", "\n  "))

    try:
        asyncio.run(_with_memory(cfg, run))
    except (MemoryError_, json.JSONDecodeError) as exc:
        print(f"error: {getattr(exc, 'code', 'memory-bad-input')}: {getattr(exc, 'text', exc)}", file=sys.stderr)
        return 2
    return 0


def _cmd_mcp(args: argparse.Namespace, cfg: GatewayConfig) -> int:
    from gateway.mcp_server.tools import McpDeps, build_server

    async def run(memory: Any) -> None:
        await build_server(McpDeps(memory)).run_stdio_async()

    asyncio.run(_with_memory(cfg, run))
    return 0


def _cmd_bench_memory(args: argparse.Namespace, cfg: GatewayConfig) -> int:
    if args.readings:
        from gateway.memory.bench_readings import run_bench_readings

        return run_bench_readings(cfg, args.readings, args.json)
    if args.postgres:
        from gateway.storage.bench_memory import run_bench_memory_postgres
        from gateway.storage.dsn import postgres_dsn

        return run_bench_memory_postgres(cfg, postgres_dsn(cfg.storage, os.environ), tuple(args.sizes), args.json,
                                         composed=args.composed)
    from gateway.memory.bench import run_bench_memory

    return run_bench_memory(cfg, tuple(args.sizes), args.writes, args.json)


def add_memory_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    mem = sub.add_parser("memory", parents=[common], help="search, add, recent, export, import or reflect memories",
                         description="The long-term memory in memory.path, from the shell: search it, add to it, "
                         "list the newest, export or import JSON lines, or run the daily reflection and portrait now.")
    mem.add_argument("action", choices=["search", "add", "recent", "export", "import", "reflect"],
                     help="search TEXT | add TEXT | recent | export (JSON lines to stdout) | import (JSON lines "
                     "from stdin) | reflect (the daily reflection and portrait, now)")
    mem.add_argument("text", nargs="?", default="", help="the query (search) or the memory (add)")
    mem.add_argument("--user", help="whose memory (default: memory.default_user; export: everyone)")
    mem.add_argument("-n", type=int, default=10, help="how many results")
    mem.add_argument("--kind", default="note", help="add: the kind (event, fact, rule, preference, ...)")
    mem.add_argument("--persistent", action="store_true", help="add: a long-term memory (rules, preferences)")
    mem.add_argument("--tag", action="append", help="add: a namespace:value tag (repeatable)")
    mem.add_argument("--all", action="append", help="search: a tag every result must carry (repeatable)")
    mem.add_argument("--any", action="append", help="search: results carry at least one of these tags")
    mem.set_defaults(func=_cmd_memory)
    mcp = sub.add_parser("mcp", parents=[common], help="serve the memory as MCP tools over stdio (for agents)",
                         description="Speaks MCP on stdin/stdout; logs go to stderr. Device tools need the "
                         "running gateway's HTTP endpoint (mcp.http).")
    mcp.set_defaults(func=_cmd_mcp)
    bench = sub.add_parser("bench-memory", parents=[common], help="memory search latency (p50/p95), recall@10, write rate",
                           description="Fills a temporary database; see gateway/memory/bench.py for the method.")
    bench.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000], help="stream sizes to measure")
    bench.add_argument("--writes", type=int, default=300, help="real writes for the throughput figure")
    bench.add_argument("--readings", type=int, default=0, metavar="N",
                       help="instead: sensor readings per second into the memory, N readings of 4 sensors "
                       "(see gateway/memory/bench_readings.py)")
    bench.add_argument("--postgres", action="store_true",
                       help="instead: the search on PostgreSQL + pgvector, in a temporary database on the server "
                       "of the DSN in $GATEWAY_PG_DSN (storage.dsn_env; see gateway/storage/bench_memory.py)")
    bench.add_argument("--composed", action="store_true",
                       help="with --postgres: vectors composed from the sentences' parts instead of one embedding "
                       "each (minutes instead of hours at 100k; see gateway/storage/bench_memory.py)")
    bench.add_argument("--json", action="store_true", help="print the figures as JSON")
    bench.set_defaults(func=_cmd_bench_memory)
