"""`gateway console password [--stdin]` and `gateway console url`: the web console's admin password
(stored scrypt-hashed in `console.password_file`; a running gateway ends older sessions at their
next request) and where to open the console."""

from __future__ import annotations

import argparse
import getpass
import socket
import sys
from typing import Any

from gateway.config import GatewayConfig
from gateway.console.password import PasswordError, PasswordFile


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("console", help="the web console: set its admin password, show its address",
                       description="The web console on the screens' port: set its admin password (`console "
                       "password`, stored hashed) or print its address (`console url`).")
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    pw = actions.add_parser("password", parents=[common], help="set the console's admin password (asks twice)",
                            description="Sets the console's admin password (asked twice on the terminal, or one "
                            "line of stdin with --stdin); it is stored hashed beside the gateway's data. Logins "
                            "of the running gateway's console use the new one from the next login on.")
    pw.add_argument("--stdin", action="store_true", help="read the password from one line of stdin (scripts)")
    actions.add_parser("url", parents=[common], help="print the console's address",
                       description="Prints the console's address(es) on this machine and the LAN, and says "
                       "when the console (console.enabled) or the screens' server it lives on "
                       "(screens.enabled) is off.")
    p.set_defaults(func=run)


def _urls(cfg: GatewayConfig) -> list[str]:
    sc = cfg.screens
    scheme = "https" if sc.tls else "http"
    lan = sc.host in ("0.0.0.0", "::", "")
    hosts = [socket.gethostname(), "127.0.0.1"] if lan else [sc.host]
    return [f"{scheme}://{host}:{sc.port}/console" for host in hosts]


def run(args: argparse.Namespace, cfg: GatewayConfig) -> int:
    if args.action == "url":
        for url in _urls(cfg):
            print(url)
        if not (cfg.console.enabled and cfg.screens.enabled):
            print("note: console.enabled or screens.enabled is off in gateway.yaml", file=sys.stderr)
        return 0
    if args.stdin:
        password = sys.stdin.readline().rstrip("\r\n")
    else:
        password = getpass.getpass("New console password: ")
        if getpass.getpass("Again: ") != password:
            print("error: the two passwords differ; nothing changed", file=sys.stderr)
            return 1
    store = PasswordFile(cfg.path(cfg.console.password_file))
    try:
        store.set(password)
    except PasswordError as exc:
        print(f"error: {exc}; nothing changed", file=sys.stderr)
        return 2
    print(f"console password set (stored hashed in {store.path}); open {_urls(cfg)[0]}")
    return 0
