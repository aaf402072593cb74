"""`gateway screens key [--new]`: the screen key LAN screens need to watch conversations and
fetch their audio (made on first use in the data folder, `screens.access_key`), with the page
URLs that carry it. `--new` replaces it: screens with the old key are refused from the next
start of the gateway (restart it)."""

from __future__ import annotations

import argparse
import socket
from typing import Any

from gateway.config import GatewayConfig
from gateway.screens.access import page_url, screen_key


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("screens", help="the LAN screens' key and page URL",
                       description="The key a LAN screen needs to watch the conversations, and the page URLs that "
                       "carry it (`screens key`; --new replaces it).")
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    key = actions.add_parser("key", parents=[common], help="print the screen key and the page URLs that carry it",
                             description="Prints the key a LAN screen needs (stored in screens.access_key) and "
                             "the page URLs that carry it, to open on the screen. --new replaces the key: "
                             "screens that used the old one are refused after the gateway restarts.")
    key.add_argument("--new", action="store_true", help="replace the key (restart the gateway afterwards)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace, cfg: GatewayConfig) -> int:
    sc = cfg.screens
    path = cfg.path(sc.access_key)
    key = screen_key(path, new=args.new)
    lan = sc.host in ("0.0.0.0", "::", "")
    hosts = [socket.gethostname(), "127.0.0.1"] if lan else [sc.host]
    print(key)
    print(f"(stored in {path}{'; restart the gateway to use the new key' if args.new else ''})")
    for host in hosts:  # with tls the port speaks both: https for other machines, http on this one
        scheme = "https" if sc.tls and host != "127.0.0.1" else "http"
        print(f"  {page_url(scheme, host, sc.port, key)}")
    print(f"  Fay clients: ws://{hosts[0]}:{sc.port}{sc.path}?device=all&key={key}"
          f"{' (or wss://)' if sc.tls else ''}")
    return 0
