"""`gateway service install|status|uninstall`: run the gateway as a systemd service.

`install` writes /etc/systemd/system/edge-voice-gateway.service (gateway/cli/service_unit.py) and,
where systemd runs, reloads it and enables it at once and at every boot; where systemd does not run
(a container, a chroot) it writes the file and says what to run on the machine. `--dry-run` prints
the unit and changes nothing. Writing a system unit needs root: run it with sudo.
"""

from __future__ import annotations

import argparse
import os
import pwd
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from gateway.cli.service_unit import SERVICE, UNIT_FILE, UnitSpec, render_unit
from gateway.config import GatewayConfig
from gateway.errors import ConfigError, GatewayError

SYSTEM_UNIT_DIR = Path("/etc/systemd/system")
Out = Callable[[str], None]


class Systemd(Protocol):
    def unavailable(self) -> str:
        """Why systemctl cannot manage the unit here ('' when it can)."""
        ...

    def systemctl(self, *args: str) -> int: ...


class HostSystemd:
    """This machine's systemd, through the systemctl command."""

    def unavailable(self) -> str:
        if shutil.which("systemctl") is None:
            return "systemctl is not installed"
        if not Path("/run/systemd/system").is_dir():
            return "systemd is not running here (no /run/systemd/system: a container or chroot?)"
        return ""

    def systemctl(self, *args: str) -> int:
        return subprocess.run(["systemctl", *args], check=False).returncode


class NoSystemd:
    """For a unit directory that is not systemd's (--unit-dir, tests): never calls systemctl."""

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def unavailable(self) -> str:
        return self.reason

    def systemctl(self, *args: str) -> int:
        raise AssertionError("NoSystemd.systemctl must not be called")


def _gateway_command() -> list[str]:
    """The absolute command of this installation's gateway (the venv's console script if there)."""
    script = Path(sys.prefix) / "bin" / "gateway"
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script.absolute())]
    return [str(Path(sys.executable).absolute()), "-m", "gateway"]  # absolute, not resolved: stays in the venv


def config_file(arg: str | None) -> Path:
    """The gateway.yaml the service runs with, absolute: --config, else $GATEWAY_CONFIG, else ./gateway.yaml
    (the order `gateway` itself uses); the service needs a file, not the built-in defaults."""
    path = Path(arg or os.environ.get("GATEWAY_CONFIG") or "gateway.yaml")
    if not path.is_file():
        raise ConfigError(f"no config file {path}: run this in the gateway's folder (where gateway.yaml is) "
                          "or pass --config FILE; the service runs `gateway run --config FILE`")
    return path.resolve()


def _user(arg: str | None) -> str:
    name = arg or os.environ.get("SUDO_USER") or pwd.getpwuid(os.getuid()).pw_name
    try:
        pwd.getpwnam(name)
    except KeyError:
        raise GatewayError(f"no user {name!r} on this machine: --user names the account the gateway runs as") from None
    return name


def unit_spec(config: Path, user: str) -> UnitSpec:
    """Run this installation's `gateway run --config CONFIG` as `user` in the config's folder."""
    return UnitSpec(user=user, working_directory=config.parent,
                    command=(*_gateway_command(), "run", "--config", str(config)))


def _need_root(unit_dir: Path, euid: int, action: str) -> None:
    if unit_dir == SYSTEM_UNIT_DIR and euid != 0:
        raise GatewayError(f"`gateway service {action}` writes {unit_dir / UNIT_FILE}, which needs root: "
                           f"run it with sudo, e.g. `sudo {_gateway_command()[0]} service {action}"
                           + (" --user $USER`" if action == "install" else "`"))


def _run_or_tell(systemd: Systemd, steps: list[list[str]], out: Out) -> int:
    why = systemd.unavailable()
    if why:
        out(f"{why}, so nothing was started or stopped. On the machine that runs the service:")
        for step in steps:
            out(f"  sudo systemctl {' '.join(step)}")
        return 0
    for step in steps:
        rc = systemd.systemctl(*step)
        if rc != 0:
            out(f"error: `systemctl {' '.join(step)}` failed (exit {rc}); see `journalctl -u {SERVICE}`")
            return 1
    return 0


def install(spec: UnitSpec, unit_dir: Path, systemd: Systemd, out: Out, *, dry_run: bool = False,
            euid: int = 0) -> int:
    target = unit_dir / UNIT_FILE
    steps = [["daemon-reload"], ["enable", "--now", SERVICE]]
    if target.exists():
        steps.append(["try-restart", SERVICE])  # a changed unit applies to the running service too
    if dry_run:
        out(f"# gateway service install --dry-run: would write {target}, then run: "
            + "; ".join(f"systemctl {' '.join(s)}" for s in steps))
        out(render_unit(spec))
        return 0
    _need_root(unit_dir, euid, "install")
    unit_dir.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{UNIT_FILE}.tmp")
    tmp.write_text(render_unit(spec), encoding="utf-8")
    os.replace(tmp, target)
    out(f"wrote {target}: runs `{' '.join(spec.command)}` as {spec.user} in {spec.working_directory}")
    if spec.user == "root":
        out("note: the gateway runs as root; `--user USER` runs it as that account instead")
    rc = _run_or_tell(systemd, steps, out)
    if rc == 0 and not systemd.unavailable():
        out(f"{SERVICE} is enabled and started; it starts again at every boot (WantedBy=multi-user.target).")
    out(f"Status: gateway service status; logs: journalctl -u {SERVICE} -f")
    return rc


def uninstall(unit_dir: Path, systemd: Systemd, out: Out, *, euid: int = 0) -> int:
    _need_root(unit_dir, euid, "uninstall")
    target = unit_dir / UNIT_FILE
    if not target.exists():
        out(f"{SERVICE} is not installed (no {target}); nothing to do")
        return 0
    if not systemd.unavailable() and systemd.systemctl("disable", "--now", SERVICE) != 0:
        out(f"error: `systemctl disable --now {SERVICE}` failed; the unit {target} is left in place")
        return 1
    target.unlink()
    out(f"removed {target}")
    return _run_or_tell(systemd, [["daemon-reload"]], out)


def status(unit_dir: Path, systemd: Systemd, out: Out) -> int:
    """0 when installed (and active, where systemd runs); systemctl's status code otherwise."""
    target = unit_dir / UNIT_FILE
    if not target.exists():
        out(f"{SERVICE} is not installed (no {target}); install it with "
            f"`sudo {_gateway_command()[0]} service install --user $USER`")
        return 1
    keys = ("User=", "WorkingDirectory=", "ExecStart=")
    out(f"installed: {target}")
    for line in target.read_text(encoding="utf-8").splitlines():
        if line.startswith(keys):
            out(f"  {line}")
    why = systemd.unavailable()
    if why:
        out(f"{why}, so whether it runs is unknown here")
        return 0
    out(f"logs: journalctl -u {SERVICE} -f")
    return systemd.systemctl("status", "--no-pager", SERVICE)


def run(args: argparse.Namespace, cfg: GatewayConfig) -> int:
    unit_dir = Path(args.unit_dir) if args.unit_dir else SYSTEM_UNIT_DIR
    systemd: Systemd = HostSystemd() if args.unit_dir is None else NoSystemd(
        f"{unit_dir} is not systemd's unit directory")
    if args.action == "install":
        # cfg is the same file, already validated by `gateway` before this command runs.
        spec = unit_spec(config_file(args.config), _user(args.user))
        return install(spec, unit_dir, systemd, print, dry_run=args.dry_run, euid=os.geteuid())
    if args.action == "uninstall":
        return uninstall(unit_dir, systemd, print, euid=os.geteuid())
    return status(unit_dir, systemd, print)


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("service", help="run the gateway as a systemd service: install, status, uninstall",
                       description="Installs `gateway run` as the systemd unit edge-voice-gateway.service (starts "
                       "at boot, restarts after a crash, logs to journald), shows whether it is installed and "
                       "running, or removes it. install and uninstall need sudo.")
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    inst = actions.add_parser("install", parents=[common],
                              help="write and enable edge-voice-gateway.service (starts at boot; needs sudo)",
                              description="Writes /etc/systemd/system/edge-voice-gateway.service for `gateway "
                              "run` in this checkout (this config, this venv), enables and starts it: it "
                              "starts at boot, restarts after a crash and logs to journald (`journalctl -u "
                              "edge-voice-gateway`). Run with sudo; --dry-run prints the unit and changes "
                              "nothing.")
    inst.add_argument("--user", help="account the gateway runs as (default: the one that ran sudo)")
    inst.add_argument("--dry-run", action="store_true", help="print the unit file, change nothing")
    actions.add_parser("status", parents=[common], help="is it installed, is it running",
                       description="Says whether the unit is installed, enabled and running (systemctl), "
                       "and where its log is.")
    actions.add_parser("uninstall", parents=[common], help="stop, disable and remove the unit (needs sudo)",
                       description="Stops and disables edge-voice-gateway.service and removes its unit file "
                       "(run with sudo). The checkout, its data and its models stay.")
    for action in actions.choices.values():  # tests: a unit directory that is not systemd's
        action.add_argument("--unit-dir", help=argparse.SUPPRESS)
    p.set_defaults(func=run)
