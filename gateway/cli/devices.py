"""`gateway devices add|list|show|remove|pending|activate`, `gateway readings` and `gateway readings prune`.

gateway/cli/main.py registers these with `add_devices_parsers(sub, common)`. On SQLite they open
the database (`devices.database`) directly; that is safe while the gateway runs (WAL mode). With
`storage.backend: postgres` the devices actions use the shared registry and activation codes
(what every gateway of the database serves), `gateway readings` and its `prune` the shared readings.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from firmware_protocol.session_messages import DEVICE_ID_PATTERN
from gateway.config import GatewayConfig
from gateway.devices import activation
from gateway.devices.auth import add_device, get_device, list_devices, remove_device
from gateway.devices.database import connect
from gateway.devices.readings import list_readings
from gateway.devices.retention import DAY_S, PruneResult, count_prunable, describe, prune_readings, prune_with

FIRMWARE_EXAMPLE = """\
Example firmware settings (keep the token secret; it is shown only now):
  #define GATEWAY_DEVICE_ID  "{device_id}"
  #define GATEWAY_TOKEN      "{token}"
  #define GATEWAY_WS_URL     "ws://<gateway-host>:{ws_port}{ws_path}"
The device sends both in its Hello (device_id, token).{enrolment}"""


def add_devices_parsers(subparsers: Any, common: argparse.ArgumentParser) -> None:
    dev = subparsers.add_parser("devices", parents=[common], help="register devices and their tokens (add, list, show, remove, pending, activate)",
                                description="The device registry: register a device and print its token and "
                                "firmware settings (add), list, show or remove devices, and approve a xiaozhi box "
                                "by the code it shows (pending, activate). Without an action: list.")
    actions = dev.add_subparsers(dest="devices_action", metavar="ACTION")
    add = actions.add_parser("add", parents=[common], help="register a device (or give it a new token) and print its credentials",
                             description="Registers DEVICE_ID and prints a new token with the firmware settings "
                             "to paste (the token is shown only now and stored hashed). For a device already "
                             "registered it issues a new token: the old one stops working at once. The running "
                             "gateway sees the change at the device's next Hello, and its embedded MQTT broker "
                             "reloads its logins by itself. Example: gateway devices add kitchen-box --name "
                             "'kitchen voice box'")
    add.add_argument("device_id", help="the id the device sends in Hello: 1..64 of [A-Za-z0-9._:-]")
    add.add_argument("--name", default="", help="a note for people, e.g. 'kitchen voice box'")
    actions.add_parser("list", parents=[common], help="list registered devices",
                       description="One line per registered device: its id, when it was last seen, its name.")
    show = actions.add_parser("show", parents=[common], help="show one device",
                              description="A device's id, name, registration and last-seen time (its token is "
                              "stored hashed and cannot be shown: `devices add ID` issues a new one). Exit 1 "
                              "when no such device is registered.")
    show.add_argument("device_id")
    rm = actions.add_parser("remove", parents=[common], help="unregister a device",
                            description="Unregisters a device: its token no longer logs in (unless "
                            "devices.open_enrolment is on). Its stored readings and memories stay. Exit 1 when "
                            "no such device is registered.")
    rm.add_argument("device_id")
    actions.add_parser("pending", parents=[common], help="list xiaozhi boxes waiting for activation, with their codes",
                       description="The xiaozhi boxes that asked to be activated (devices.open_enrolment off): "
                       "the 6-digit code each shows and speaks, its id (the box's MAC address), its board and "
                       "firmware, and when the code expires (xiaozhi.activation_ttl_s). Approve one with "
                       "`gateway devices activate CODE`.")
    act = actions.add_parser("activate", parents=[common], help="approve the xiaozhi box that shows/speaks this 6-digit code",
                             description="Approves the waiting xiaozhi box whose screen shows (and whose "
                             "speaker says) CODE: the box is registered and connects at its next OTA request, "
                             "within a few seconds. Exit 1 when no box waits with that code (wrong, or expired: "
                             "a box that asks again gets a new code; see `gateway devices pending`).")
    act.add_argument("code", help="the 6-digit code the box shows and speaks")
    dev.set_defaults(devices_action="list", func=run_devices)

    rd = subparsers.add_parser("readings", parents=[common], help="list stored sensor readings, newest first",
                               description="The sensor readings devices sent, newest first (from SQLite, or the "
                               "shared PostgreSQL with storage: postgres). `readings prune` deletes old ones.")
    rd.add_argument("--device", help="only this device id")
    rd.add_argument("--kind", help="only this kind, e.g. blood_pressure")
    rd.add_argument("--limit", type=int, default=50, help="at most this many (default 50)")
    rd.add_argument("--json", action="store_true", help="one JSON object per line")
    rd.set_defaults(func=run_readings)
    rd_actions = rd.add_subparsers(dest="readings_action", metavar="ACTION")
    prune = rd_actions.add_parser("prune", parents=[common], help="delete readings received more than DAYS ago "
                                  "(default: devices.readings_retention_days)",
                                  description="Deletes the readings received more than DAYS ago (default: "
                                  "devices.readings_retention_days; the running gateway also prunes by itself "
                                  "once a day), in small batches so a running gateway is not held up, and "
                                  "prints how many per device. A device's pruned seqs stay taken: a late "
                                  "resend of one is answered duplicate, not stored again. --dry-run only "
                                  "counts.")
    prune.add_argument("--older-than", type=float, metavar="DAYS", help="delete readings received more than DAYS ago")
    prune.add_argument("--dry-run", action="store_true", help="only count what would be deleted, per device")
    prune.set_defaults(func=run_prune)


def run_devices(args: argparse.Namespace, cfg: GatewayConfig) -> int:
    action = args.devices_action
    if action in ("add", "show", "remove") and not _valid_id(args.device_id):
        print(f"error: device id {args.device_id!r} must be 1..64 of [A-Za-z0-9._:-]", file=sys.stderr)
        return 2
    if action == "activate" and not activation.valid_code(args.code.strip()):
        print(f"error: {args.code!r} is not an activation code: the box shows and speaks 6 digits", file=sys.stderr)
        return 2
    if cfg.storage.backend == "postgres":
        return _run_on_postgres(args, cfg)
    conn = connect(cfg.path(cfg.devices.database))
    try:
        if action == "list":
            return _print_list(list_devices(conn))
        if action == "pending":
            return _print_pending(activation.list_pending(conn, time.time()), time.time())
        if action == "activate":
            code = args.code.strip()
            return _print_approved(code, activation.approve(conn, code, cfg.xiaozhi.activation_ttl_s, time.time()), cfg)
        if action == "add":
            return _print_added(args, cfg, add_device(conn, args.device_id, args.name))
        if action == "show":
            return _print_device(args.device_id, get_device(conn, args.device_id))
        return _print_removed(args.device_id, remove_device(conn, args.device_id))
    finally:
        conn.close()


def _print_list(devices: list[Any]) -> int:
    if not devices:
        print("no devices registered (add one with `gateway devices add DEVICE_ID`)")
    for d in devices:
        seen = d.last_seen.isoformat(timespec="seconds") if d.last_seen else "never"
        print(f"{d.device_id:<24} last seen {seen:<26} {d.name}")
    return 0


def _print_removed(device_id: str, removed: bool) -> int:
    if removed:
        print(f"device {device_id} removed; it can no longer connect unless open enrolment is on")
        return 0
    print(f"error: no device {device_id}", file=sys.stderr)
    return 1


def _print_added(args: argparse.Namespace, cfg: GatewayConfig, token: str) -> int:
    print(f"device {args.device_id} registered")
    print(f"  device_id: {args.device_id}\n  token:     {token}\n")
    enrolment = ("" if not cfg.devices.open_enrolment else
                 "\nNote: devices.open_enrolment is on, so unregistered devices can connect too.")
    print(FIRMWARE_EXAMPLE.format(device_id=args.device_id, token=token, ws_port=cfg.server.websocket_port,
                                  ws_path=cfg.server.websocket_path, enrolment=enrolment))
    return 0


def _print_device(device_id: str, d: Any) -> int:
    if d is None:
        print(f"error: no device {device_id} (see `gateway devices list`)", file=sys.stderr)
        return 1
    print(f"device_id:  {d.device_id}\nname:       {d.name}\nregistered: {d.created_at.isoformat(timespec='seconds')}")
    print(f"last seen:  {d.last_seen.isoformat(timespec='seconds') if d.last_seen else 'never'}")
    print("token:      (stored hashed; `gateway devices add ID` again issues a new one)")
    return 0


def _run_on_postgres(args: argparse.Namespace, cfg: GatewayConfig) -> int:
    """storage.backend postgres: every action on the shared registry (DeviceRegistry) and activation
    codes (ActivationStore), the ones every gateway of the database serves."""
    import asyncio
    import os

    from gateway.app import postgres_backend

    action = args.devices_action

    async def on_backend() -> int:
        backend = postgres_backend(cfg, os.environ)
        await backend.open()  # a ConfigError naming storage.dsn_env when unreachable
        try:
            registry = backend.devices
            if action == "list":
                return _print_list(await registry.list_devices())
            if action in ("pending", "activate"):
                codes = backend.activations(cfg.xiaozhi.activation_ttl_s)
                if action == "pending":
                    return _print_pending(await codes.pending(), codes.now())
                code = args.code.strip()
                return _print_approved(code, await codes.approve(code), cfg)
            if action == "add":
                return _print_added(args, cfg, await registry.add_device(args.device_id, args.name))
            if action == "show":
                return _print_device(args.device_id, await registry.get_device(args.device_id))
            return _print_removed(args.device_id, await registry.remove_device(args.device_id))
        finally:
            await backend.close()

    return asyncio.run(on_backend())


def _print_pending(waiting: list[Any], now: float) -> int:
    if not waiting:
        print("no box is waiting for activation (a new xiaozhi box asks for a code at boot when "
              "devices.open_enrolment is off)")
    for p in waiting:
        state = "approved, waiting for the box to ask again" if p.approved else f"expires in {int(p.expires_at - now)} s"
        print(f"{p.code}  {p.device_id:<24} {p.details}  ({state})")
    return 0


def _print_approved(code: str, approved: Any, cfg: GatewayConfig) -> int:
    if approved is None:
        print(f"error: no box is waiting with code {code}: it is wrong or expired (codes last "
              f"{cfg.xiaozhi.activation_ttl_s} s; a box that asks again gets a new one). "
              "See `gateway devices pending`.", file=sys.stderr)
        return 1
    print(f"box {approved.device_id} approved ({approved.details}); it connects at its next OTA request, "
          "within a few seconds (its token is stored hashed)")
    return 0


def _valid_id(device_id: str) -> bool:
    import re

    return re.fullmatch(DEVICE_ID_PATTERN, device_id) is not None


def run_readings(args: argparse.Namespace, cfg: GatewayConfig) -> int:
    if cfg.storage.backend == "postgres":
        rows = _readings_on_postgres(cfg, args.device, args.kind, args.limit)
    else:
        conn = connect(cfg.path(cfg.devices.database))
        try:
            rows = list_readings(conn, args.device, args.kind, args.limit)
        finally:
            conn.close()
    if not rows and not args.json:
        print("no readings stored yet")
    for r in rows:
        if args.json:
            print(json.dumps({"id": r.reading_id, "device_id": r.device_id, "seq": r.seq, "kind": r.kind,
                              "values": r.values, "units": r.units, "measured_at": r.measured_at.isoformat(),
                              "received_at": r.received_at.isoformat(), "clock": r.clock}, ensure_ascii=False))
        else:
            values = ", ".join(f"{n} {v:g} {r.units[n]}".rstrip() for n, v in r.values.items())
            clock = "" if r.clock == "device" else " (gateway clock)"
            print(f"#{r.reading_id:<6} {r.measured_at.isoformat(timespec='seconds')}{clock}  {r.device_id}  {r.kind}: {values}")
    return 0


def _readings_on_postgres(cfg: GatewayConfig, device: str | None, kind: str | None, limit: int) -> list[Any]:
    """Every gateway's readings, newest first (the console's ReadingList)."""
    import asyncio
    import os

    from gateway.app import postgres_backend

    async def on_backend() -> list[Any]:
        backend = postgres_backend(cfg, os.environ)
        await backend.open()
        try:
            return await backend.reading_list.recent(kind, limit, 0.0, device_id=device)
        finally:
            await backend.close()

    return asyncio.run(on_backend())


def run_prune(args: argparse.Namespace, cfg: GatewayConfig) -> int:
    days = args.older_than if args.older_than is not None else cfg.devices.readings_retention_days
    if not days or days < 0:
        print("error: nothing to prune: devices.readings_retention_days is 0 (keep forever); "
              "pass --older-than DAYS (more than 0)", file=sys.stderr)
        return 2
    cutoff = time.time() - days * DAY_S
    if cfg.storage.backend == "postgres":
        result = _prune_on_postgres(cfg, cutoff, args.dry_run)
    else:
        conn = connect(cfg.path(cfg.devices.database))
        try:  # safe while the gateway runs: WAL, and each batch is one short transaction
            result = count_prunable(conn, cutoff) if args.dry_run else prune_readings(conn, cutoff)
        finally:
            conn.close()
    print(describe(result, dry_run=args.dry_run))
    return 0


def _prune_on_postgres(cfg: GatewayConfig, cutoff: float, dry_run: bool) -> PruneResult:
    """The shared readings, in the retention's batches: never what the memory's feed has not consumed."""
    import asyncio
    import os

    from gateway.app import postgres_backend

    async def on_backend() -> PruneResult:
        backend = postgres_backend(cfg, os.environ)
        await backend.open()
        try:
            pruner = backend.pruner(feeds_memory=cfg.memory.enabled)
            if dry_run:
                return await pruner.count(cutoff)
            return await prune_with(pruner, cutoff)
        finally:
            await backend.close()

    return asyncio.run(on_backend())
