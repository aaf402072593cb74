"""One cluster member to run beside others: `python -m gateway.cli.cluster_target CONFIG_JSON`.

What `gateway run` serves with `cluster.enabled` (default_links: the MQTT link as a member of the
cluster, on the external broker `broker_port` on 127.0.0.1, MQTT 5, `storage: postgres` with the
DSN from $GATEWAY_PG_DSN), on the fake voice engines so it starts in a second; unless asked, no
WebSocket, CoAP, screens or memory. CONFIG_JSON: `id` (the member id), `broker_port`, `folder` (its own
files), optional `cluster` overrides (heartbeat_s, ...) and `mcp_port` (then it also runs the
memory and the MCP server on 127.0.0.1:mcp_port, token `mcp_token`), `real_models` (true: the
real VAD, ASR and TTS loaded as `gateway run` loads them, instead of the fake ones), `screens_port`
(the LAN screens on 127.0.0.1:screens_port, plain http, the screen key in `folder`/screens-access-key),
`console_password` (with screens_port: the web console on that port too, this admin password),
`websocket_port` / `coap_port` (the device WebSocket on 127.0.0.1:websocket_port, `/ws`, and CoAP
on udp 127.0.0.1:coap_port, as behind a load balancer: their sessions take the device's lease),
`xiaozhi` (true: the xiaozhi OTA and WebSocket endpoints on the device WebSocket port too).
It prints `ready` on stdout once
connected, logs to stderr, and serves until SIGTERM (a clean leave) or SIGKILL (a crash). The
cluster tests and `gateway bench-cluster` start three of them as separate processes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import signal
import sys
from pathlib import Path
from typing import Any

from gateway.app import build_gateway, load_runner
from gateway.config import parse_config
from gateway.console.password import PasswordFile
from gateway.engines.fake import FakeAsr, FakeTts, FakeVad
from gateway.engines.runner import EngineRunner

CHECKOUT = Path(__file__).resolve().parents[2]


def member_config(args: dict[str, Any]) -> dict[str, Any]:
    folder = Path(args["folder"])
    mcp = {"http": True, "host": "127.0.0.1", "port": int(args.get("mcp_port", 0)), "token": args.get("mcp_token", "")}
    return {
        "server": {"host": "127.0.0.1", "websocket_port": int(args.get("websocket_port", 0))},
        "mqtt": {"host": "127.0.0.1", "port": int(args["broker_port"]), "protocol": "5"},
        "cluster": {"enabled": True, "id": args["id"], **args.get("cluster", {})},
        "storage": "postgres",
        "devices": {"database": str(folder / "gateway.db"), "max_readings_per_minute": 0,
                    "max_readings_per_minute_per_peer": 0},
        "coap": {"enabled": "coap_port" in args, "port": int(args.get("coap_port", 5683))},
        "xiaozhi": {"enabled": bool(args.get("xiaozhi", False))},
        "screens": {"enabled": "screens_port" in args, "host": "127.0.0.1", "port": int(args.get("screens_port", 0)),
                    "tls": False, "access_key": str(folder / "screens-access-key")},
        "console": {"enabled": "console_password" in args, "password_file": str(folder / "console-password")},
        "memory": {"enabled": "mcp_port" in args, "path": str(folder / "memory.db")},
        **({"mcp": mcp} if "mcp_port" in args else {}),
    }


async def _serve(args: dict[str, Any]) -> None:
    cfg = parse_config(member_config(args), CHECKOUT)
    if "console_password" in args:  # as `gateway console password` sets it
        PasswordFile(cfg.path(cfg.console.password_file)).set(args["console_password"])
    if args.get("real_models"):  # what `gateway run` serves: its models, loaded and warmed up
        runner = await asyncio.to_thread(load_runner, cfg, lambda line: logging.info("%s", line))
    else:
        runner = EngineRunner(FakeVad(), FakeAsr(), FakeTts())
    gateway = build_gateway(cfg, runner, lambda line: None)
    serve = {"mqtt", "screens", "coap"} | ({"websocket"} if "websocket_port" in args else set())
    gateway.links = [link for link in gateway.links if link.name in serve]  # the WebSocket only when asked
    ready = asyncio.Event()
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    serving = asyncio.create_task(gateway.serve(ready))
    waiting = asyncio.create_task(ready.wait())
    await asyncio.wait([serving, waiting], return_when=asyncio.FIRST_COMPLETED)
    if serving.done():
        serving.result()  # raises why it could not start
    print("ready", flush=True)
    stopping = asyncio.create_task(stop.wait())
    await asyncio.wait([serving, stopping], return_when=asyncio.FIRST_COMPLETED)
    serving.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await serving
    print("stopped", flush=True)


def main() -> None:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(name)s: %(message)s")
    asyncio.run(_serve(json.loads(sys.argv[1])))


if __name__ == "__main__":
    main()
