"""The systemd unit of `gateway service install`: a pure function from what to run to the file text.

The unit starts at boot (WantedBy=multi-user.target, after the network is up), runs `gateway run
--config FILE` as one user in the config's folder, logs to journald and restarts after a crash.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

SERVICE = "edge-voice-gateway"
UNIT_FILE = f"{SERVICE}.service"
# glibc's huge-page malloc, as `gateway run` re-execs itself with (gateway/cli/main.py); set here
# the gateway starts with it and does not need to re-exec.
HUGE_PAGES = "GLIBC_TUNABLES=glibc.malloc.hugetlb=1"


@dataclass(frozen=True)
class UnitSpec:
    user: str  # the account the gateway runs as
    working_directory: Path  # absolute: the config's folder (relative paths in it resolve there)
    command: tuple[str, ...]  # absolute argv, e.g. (".../.venv/bin/gateway", "run", "--config", "...")
    restart_sec: int = 5
    timeout_stop_sec: int = 30


def _escape(value: str) -> str:
    """systemd expands %specifiers in every value: a literal % is written %%."""
    return value.replace("%", "%%")


def quote_arg(arg: str) -> str:
    """One ExecStart= argument: as is when plain, else double-quoted with C escapes; $ and % literal."""
    arg = _escape(arg).replace("$", "$$")
    if arg and not any(c.isspace() or c in "\"'\\;" for c in arg):
        return arg
    return '"' + arg.replace("\\", "\\\\").replace('"', '\\"') + '"'


def command_line(argv: Sequence[str]) -> str:
    return " ".join(quote_arg(a) for a in argv)


def render_unit(spec: UnitSpec) -> str:
    """The text of edge-voice-gateway.service for `spec`."""
    return f"""\
# Written by `gateway service install`; `gateway service uninstall` removes it.
[Unit]
Description=Edge voice gateway (offline voice for ESP32 voice boxes, robots and sensors)
Wants=network-online.target
After=network-online.target

[Service]
Type=exec
User={_escape(spec.user)}
WorkingDirectory={_escape(str(spec.working_directory))}
Environment={HUGE_PAGES}
Environment=PYTHONUNBUFFERED=1
ExecStart={command_line(spec.command)}
# systemd stops the gateway with SIGTERM, which `gateway run` handles as Ctrl+C: it closes the
# links, prints "stopped" and exits 0 (gateway/cli/run.py); SIGKILL only after TimeoutStopSec.
KillSignal=SIGTERM
TimeoutStopSec={spec.timeout_stop_sec}
Restart=on-failure
RestartSec={spec.restart_sec}
# Exit 2 is a configuration error (a bad gateway.yaml, a missing model): restarting cannot fix it.
RestartPreventExitStatus=2
StandardOutput=journal
StandardError=journal
SyslogIdentifier={SERVICE}

[Install]
WantedBy=multi-user.target
"""
