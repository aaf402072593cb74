"""`gateway run`: load the models, serve every link, print where devices connect; Ctrl+C stops."""

from __future__ import annotations

import argparse

import asyncio
import sys
from typing import Any

from gateway import __version__
from gateway.cli.progress import progress
from gateway.config import GatewayConfig


def run(args: argparse.Namespace, cfg: GatewayConfig) -> int:
    from gateway.app import Gateway, connect_hints, default_links, load_runner

    if args.port is not None or args.host is not None:
        server = cfg.server.model_copy(
            update={k: v for k, v in (("websocket_port", args.port), ("host", args.host)) if v is not None}
        )
        # The LAN screens follow: same address, and any free port when the devices' port is 0.
        screens = cfg.screens.model_copy(update={k: v for k, v in (("host", args.host), ("port", 0 if args.port == 0 else None)) if v is not None})
        cfg = cfg.model_copy(update={"server": server, "screens": screens})
    print(f"edge-voice-gateway {__version__}: loading models (first start prepares them)...", file=sys.stderr)
    runner = load_runner(cfg, progress)
    links = default_links(cfg)
    memory = None
    if cfg.memory.enabled:
        from gateway.memory.service import MemoryService

        memory = MemoryService.from_config(cfg, progress=progress)
    gateway = Gateway(cfg, runner, links, memory=memory)

    async def main() -> None:
        ready = asyncio.Event()
        task = asyncio.create_task(gateway.serve(ready))
        await ready.wait()
        port = links[0].port
        print("\nGateway ready. Voice boxes connect to:", flush=True)
        for hint in connect_hints(cfg, port):
            print(f"  {hint}")
        for link in links:
            if link.name == "screens":
                host = cfg.screens.host if cfg.screens.host not in ("0.0.0.0", "::", "") else "127.0.0.1"
                print(f"Screens and the browser voice box: {link.scheme}://{host}:{link.port}/  (from the LAN: this machine's name)")
        print("\nTry it without hardware, in another terminal:")
        print(f'  gateway simulate --say "What time is it?" --url ws://127.0.0.1:{port}{cfg.server.websocket_path} --out reply.wav')
        print("Stop with Ctrl+C.\n", flush=True)
        await task

    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        print("stopped", file=sys.stderr)
    except OSError as exc:
        print(f"error: cannot listen on {cfg.server.host}:{cfg.server.websocket_port}: {exc.strerror}. "
              "Is another gateway running? Change server.websocket_port or pass --port.", file=sys.stderr)
        return 1
    finally:
        runner.close()
    return 0


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("run", parents=[common], help="serve devices (prints where they connect)")
    p.add_argument("--port", type=int, help="WebSocket port (overrides server.websocket_port; 0 = any free port)")
    p.add_argument("--host", help="address to listen on (overrides server.host)")
    p.set_defaults(func=run)
