"""Who holds a port: the process listening on a TCP port (or bound to a UDP one), from Linux /proc.

`holder_of(port)` -> a `PortHolder` (pid, name, command line) or None when nothing listens or the
holder cannot be seen (another user's process, without root; not Linux). `is_gateway_run` tells
whether a command line is this program's `gateway run` (console script or `python -m gateway`).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

_TCP_LISTEN, _UDP_UNCONNECTED = "0A", "07"
# Options of `gateway` that come before the command and take a value.
_VALUE_OPTIONS = {"--config"}


@dataclass(frozen=True)
class PortHolder:
    pid: int
    name: str  # /proc/<pid>/comm, e.g. python3
    cmdline: tuple[str, ...]

    @property
    def is_gateway(self) -> bool:
        return is_gateway_run(self.cmdline)

    def __str__(self) -> str:
        return f"pid {self.pid} ({self.name})"


def _command_after(args: Sequence[str]) -> str:
    """The command word in `gateway [options] COMMAND ...` (options before it skipped)."""
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg in _VALUE_OPTIONS:
            skip = True
        elif not arg.startswith("-"):
            return arg
    return ""


def _program_argv(cmdline: Sequence[str]) -> Sequence[str]:
    """The program's own argv. Under qemu-user started by binfmt_misc (an arm64 gateway on an
    x86-64 machine: tools/check-aarch64, an emulated container) the kernel shows the emulator
    first, then the program's path, then (binfmt flag P) the program's own argv[0]."""
    first = Path(cmdline[0]).name if cmdline else ""
    if not (first.startswith("qemu-") or "binfmt" in first):
        return cmdline
    rest = cmdline[1:]
    if len(rest) >= 2 and Path(rest[0]).name == Path(rest[1]).name:
        rest = rest[1:]
    return rest


def is_gateway_run(cmdline: Sequence[str]) -> bool:
    """True for `.../gateway run ...`, `python .../gateway run ...` and `python -m gateway run ...`
    (also under qemu-user, see `_program_argv`)."""
    cmdline = _program_argv(cmdline)
    for i, arg in enumerate(cmdline[:3]):
        if arg == "-m" and i + 1 < len(cmdline) and cmdline[i + 1] == "gateway":
            return _command_after(cmdline[i + 2:]) == "run"
        if Path(arg).name == "gateway":
            return _command_after(cmdline[i + 1:]) == "run"
    return False


def _socket_inodes(port: int, kind: int) -> set[str]:
    tables = ("tcp", "tcp6") if kind == socket.SOCK_STREAM else ("udp", "udp6")
    state = _TCP_LISTEN if kind == socket.SOCK_STREAM else _UDP_UNCONNECTED
    inodes: set[str] = set()
    for table in tables:
        try:
            rows = Path(f"/proc/net/{table}").read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            cols = row.split()
            if len(cols) > 9 and cols[3] == state and int(cols[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(cols[9])
    return inodes


def _process(pid: str) -> PortHolder:
    holder = _process_plain(pid)
    if not holder.is_gateway:  # a child of `gateway run` (its embedded mosquitto) holds the port for it
        try:
            ppid = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1]
            parent = _process_plain(ppid)
        except (OSError, IndexError):
            return holder
        if parent.is_gateway:
            return parent
    return holder


def _process_plain(pid: str) -> PortHolder:
    name = Path(f"/proc/{pid}/comm").read_text().strip()
    raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    return PortHolder(int(pid), name, tuple(a.decode(errors="replace") for a in raw.split(b"\0") if a))


def holder_of(port: int, kind: int = socket.SOCK_STREAM) -> PortHolder | None:
    """The process listening on TCP `port` (kind SOCK_STREAM) or bound to UDP `port` (SOCK_DGRAM)."""
    inodes = _socket_inodes(port, kind)
    for pid in filter(str.isdigit, os.listdir("/proc") if inodes else []):
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
                if link.startswith("socket:[") and link[8:-1] in inodes:
                    return _process(pid)
        except OSError:  # gone meanwhile, or another user's process (not readable without root)
            continue
    return None
