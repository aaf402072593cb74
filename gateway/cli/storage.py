"""`gateway storage migrate --from sqlite --to postgres` (gateway/storage/from_sqlite.py)."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from gateway.config import ConfigError, GatewayConfig


def _cmd_storage(args: argparse.Namespace, cfg: GatewayConfig) -> int:
    from gateway.storage.dsn import postgres_dsn

    try:
        from gateway.storage.from_sqlite import CopyMismatch, migrate_sqlite_to_postgres
    except ImportError as exc:  # psycopg: the postgres extra
        raise ConfigError(f"gateway storage needs the PostgreSQL driver ({exc.name}): "
                          ".venv/bin/pip install -e '.[postgres]'") from None

    dsn = postgres_dsn(cfg.storage, os.environ)
    memory = cfg.path(cfg.memory.path) if cfg.memory.enabled else None
    try:
        report = migrate_sqlite_to_postgres(cfg.path(cfg.devices.database), memory, dsn, progress=print)
    except CopyMismatch as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"done: {sum(r.inserted for r in report)} rows copied into PostgreSQL "
          f"({', '.join(f'{r.table} {r.inserted}' for r in report)}); every SQLite row is there, "
          "with the same content. "
          "Now set storage.backend: postgres in gateway.yaml.")
    return 0


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("storage", parents=[common], help="move a box's data from SQLite into PostgreSQL",
                       description="Copies devices, readings, memories (with embeddings), profiles and feed cursors "
                       "from devices.database and memory.path into the PostgreSQL whose DSN is in the variable "
                       "storage.dsn_env names (default GATEWAY_PG_DSN). Safe to run again: copies only what is "
                       "missing. Stop the gateway first.")
    p.add_argument("action", choices=["migrate"])
    p.add_argument("--from", dest="source", choices=["sqlite"], required=True)
    p.add_argument("--to", dest="target", choices=["postgres"], required=True)
    p.set_defaults(func=_cmd_storage)
