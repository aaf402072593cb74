"""`gateway run`: check ports and files, load the models, serve every link, print where devices
connect; Ctrl+C or SIGTERM stops (gateway/cli/stopping.py)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import socket
import sys
from typing import TYPE_CHECKING, Any

from gateway import __version__
from gateway.cli.progress import progress
from gateway.cli.stopping import sigterm_interrupts, sigterm_sets
from gateway.config import GatewayConfig
from gateway.errors import GatewayError
from gateway.links.base import DeviceLink
from gateway.console.password import PasswordFile
from gateway.screens.access import page_url, screen_key

if TYPE_CHECKING:
    from gateway.app import Gateway

log = logging.getLogger(__name__)


def _with_overrides(args: argparse.Namespace, cfg: GatewayConfig) -> GatewayConfig:
    if args.port is None and args.host is None:
        return cfg
    server = cfg.server.model_copy(
        update={k: v for k, v in (("websocket_port", args.port), ("host", args.host)) if v is not None}
    )
    # The LAN screens follow: same address, and any free port when the devices' port is 0.
    screens = cfg.screens.model_copy(update={k: v for k, v in (("host", args.host), ("port", 0 if args.port == 0 else None)) if v is not None})
    return cfg.model_copy(update={"server": server, "screens": screens})


def _preflight(cfg: GatewayConfig) -> int:
    """Ports and files, before the models load: 0, or the exit code after one line per problem."""
    from gateway.cli.preflight import file_problems, port_problems, serial_notes
    from gateway.config.ports import listen_ports, port_clashes

    for note in serial_notes(cfg):
        log.warning("%s", note)
    files = [*port_clashes(listen_ports(cfg)), *file_problems(cfg)]  # --port / --host can make two meet
    ports = [p.text for p in port_problems(cfg)]
    for line in (*files, *ports):
        print(f"error: {line}", file=sys.stderr)
    return 2 if files else 1 if ports else 0


def _announce(cfg: GatewayConfig, links: list[DeviceLink]) -> None:
    from gateway.app_links import connect_hints

    port = links[0].port
    print("\nGateway ready. Voice boxes connect to:", flush=True)
    for hint in connect_hints(cfg, port):
        print(f"  {hint}")
    for link in links:
        if link.name == "screens":
            lan = cfg.screens.host in ("0.0.0.0", "::", "")
            host = socket.gethostname() if lan else cfg.screens.host
            scheme = "http" if host in ("127.0.0.1", "localhost", "::1") else link.scheme
            key = screen_key(cfg.path(cfg.screens.access_key))
            print(f"Screens (watch every conversation; the key is `gateway screens key`): "
                  f"{page_url(scheme, host, link.port, key)}")
            print(f"The browser voice box: {scheme}://{host}:{link.port}/")
            if scheme == "https":  # the port speaks http too, for this machine (no certificate to accept)
                print(f"  (a self-signed certificate: the browser asks to accept it once; on this machine "
                      f"also http://127.0.0.1:{link.port}/)")
            if cfg.console.enabled:  # the first run makes the admin password and shows it once
                made = PasswordFile(cfg.path(cfg.console.password_file)).ensure()
                print(f"Console: {link.scheme}://{host}:{link.port}/console" + (
                    f"  (admin password, shown only now: {made} ; change it with `gateway console password`)"
                    if made else "  (its password: `gateway console password`)"))
    print("\nTry it without hardware, in another terminal:")
    print(f'  gateway simulate --say "What time is it?" --url ws://127.0.0.1:{port}{cfg.server.websocket_path} --out reply.wav')
    print("Stop with Ctrl+C.\n", flush=True)


async def _serve(gateway: Gateway) -> None:
    """Serve until SIGTERM or Ctrl+C; a link that cannot listen ends it (its OSError raised)."""
    stop, ready = asyncio.Event(), asyncio.Event()

    async def announce() -> None:
        await ready.wait()
        _announce(gateway.cfg, gateway.links)

    with sigterm_sets(stop):
        async with asyncio.TaskGroup() as tg:
            serving = tg.create_task(gateway.serve(ready), name="gateway")
            announcing = tg.create_task(announce(), name="announce")
            await stop.wait()  # a failing link cancels this wait (the TaskGroup ends with its error)
            serving.cancel()
            announcing.cancel()


def _first(errors: BaseExceptionGroup) -> BaseException:
    first: BaseException = errors
    while isinstance(first, BaseExceptionGroup):
        first = first.exceptions[0]
    return first


def _failed_to_listen(cfg: GatewayConfig, errors: BaseExceptionGroup) -> None:
    """A link could not listen although the port was free before the models loaded (a race)."""
    from gateway.cli.preflight import port_problems

    lines = [p.text for p in port_problems(cfg)]  # the gateway's own links are closed by now
    first = _first(errors)
    why = first.strerror if isinstance(first, OSError) and first.strerror else str(first)
    print(f"error: {lines[0] if lines else f'a link cannot listen: {why}'}", file=sys.stderr)


def run(args: argparse.Namespace, cfg: GatewayConfig) -> int:
    """Exit 0 when stopped (Ctrl+C or SIGTERM), 1 when a port is taken, 2 for a bad config file."""
    from gateway.app import build_gateway, load_runner
    from gateway.links.limits import raise_fd_limit

    cfg = _with_overrides(args, cfg)
    if code := _preflight(cfg):
        return code
    raise_fd_limit()  # one file descriptor per connection: 1,024 would cap the links far too early
    runner = None
    with sigterm_interrupts():  # from here on SIGTERM stops like Ctrl+C, also while models load
        try:
            print(f"edge-voice-gateway {__version__}: loading models (first start prepares them)...", file=sys.stderr)
            runner = load_runner(cfg, progress)
            asyncio.run(_serve(build_gateway(cfg, runner, progress)))
        except KeyboardInterrupt:
            pass
        except BaseExceptionGroup as group:  # from the serving TaskGroup
            failed, rest = group.split(OSError)
            if failed is None:
                config, _ = group.split(GatewayError)
                if config is None:
                    raise
                print(f"error: {_first(config)}", file=sys.stderr)
                return 2
            if rest is not None:
                log.error("while stopping after a link failed", exc_info=rest)
            _failed_to_listen(cfg, failed)
            return 1
        finally:
            if runner is not None:
                runner.close()
    print("stopped", file=sys.stderr)
    return 0


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("run", parents=[common], help="serve devices (prints where they connect)",
                       description="Checks that every port is free and every file the config names is valid, "
                       "loads the models, serves every enabled link and prints where devices connect. Ctrl+C or "
                       "SIGTERM stops it. Exit code 0 when stopped, 1 when a port is taken, 2 for a bad config or file.")
    p.add_argument("--port", type=int, help="WebSocket port (default: server.websocket_port; 0 = any free port)")
    p.add_argument("--host", help="address to listen on (default: server.host)")
    p.set_defaults(func=run)
