"""`gateway run`'s checks before the models load (which takes minutes on a slow board): every
port it will listen on is free, and every file the config names is there and valid.

Each problem is one line naming what is wrong and the config key to change: a taken port names
the process holding it (gateway/cli/ports.py), a broken file names the file and the key.
"""

from __future__ import annotations

import errno
import socket
from dataclasses import dataclass
from pathlib import Path

import yaml

from gateway.cli.doctor_ports import Listener, listeners
from gateway.cli.ports import PortHolder, holder_of
from gateway.config import GatewayConfig
from gateway.errors import ConfigError


@dataclass(frozen=True)
class PortProblem:
    listener: Listener
    holder: PortHolder | None  # who holds the port (None: free but not bindable, or not visible)
    text: str  # one line: the port, who holds it, the key to change


def _not_asked(what: str) -> str:
    raise RuntimeError(f"{what}: gateway run does not probe")  # doctor's probes are not needed here


def run_listeners(cfg: GatewayConfig) -> list[Listener]:
    """Every port `gateway run` listens on: doctor's list, and the MCP endpoint (mcp.http)."""
    ports = [p for p in listeners(cfg) if p.port != 0]  # 0: any free port, cannot clash
    if cfg.memory.enabled and cfg.mcp.http and cfg.mcp.port != 0:
        ports.append(Listener("MCP HTTP", cfg.mcp.host, cfg.mcp.port, socket.SOCK_STREAM, "mcp.port",
                              lambda: _not_asked("MCP HTTP")))
    return ports


def _bind_error(listener: Listener) -> OSError | None:
    family = socket.AF_INET6 if ":" in listener.host else socket.AF_INET
    try:
        with socket.socket(family, listener.kind) as s:
            if listener.kind == socket.SOCK_STREAM:  # as the links do (a closed socket's TIME_WAIT is no clash);
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # on UDP it would hide a holder
            s.bind((listener.host, listener.port))
    except OSError as exc:
        return exc
    return None


def _change(listener: Listener) -> str:
    flag = " (or pass --port)" if listener.key == "server.websocket_port" else ""
    return f"change {listener.key} in gateway.yaml{flag}"


def port_problems(cfg: GatewayConfig) -> list[PortProblem]:
    """One problem per port `gateway run` cannot listen on."""
    problems = []
    for p in run_listeners(cfg):
        exc = _bind_error(p)
        if exc is None:
            continue
        where = f"{p.what} port {p.host}:{p.port}"
        holder = holder_of(p.port, p.kind) if exc.errno == errno.EADDRINUSE else None
        if exc.errno == errno.EADDRINUSE and holder is not None and holder.is_gateway:
            text = f"{where} is in use by {holder}, a running gateway: is another gateway running? Stop it, or {_change(p)}"
        elif exc.errno == errno.EADDRINUSE:
            text = f"{where} is in use by {holder or 'another process'}: stop it, or {_change(p)}"
        elif exc.errno == errno.EACCES:
            text = f"{where}: permission denied (ports below 1024 need root): {_change(p)}"
        else:
            text = f"{where}: cannot listen ({exc.strerror}): the host must be an address of this machine (0.0.0.0 = all)"
        problems.append(PortProblem(p, holder, text))
    return problems


def _read(path: Path, key: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise ConfigError(f"{key}: cannot read {path}: {why}") from None


def _yaml(path: Path, key: str) -> object:
    try:
        return yaml.safe_load(_read(path, key))
    except yaml.YAMLError as exc:
        raise ConfigError(f"{key}: {path} is not valid YAML: {exc}") from None


def _check_file(key: str, path: Path) -> None:
    """Raises ConfigError (naming the key and the file) when the file cannot be used."""
    from gateway.brain.replies import load_reply_table
    from gateway.expression.hints import parse_hints
    from gateway.expression.rules import parse_rules
    from gateway.expression.sentiment import parse_lexicon
    from gateway.expression.servo import parse_servo_map

    try:
        if key == "brain.replies":
            load_reply_table(path)
        elif key == "expression.action_rules":
            rules, problems = parse_rules(_read(path, key))
            if not rules and problems:  # a bad header: no row could load (bad rows are only skipped)
                raise ConfigError(f"{path} line {problems[0].line}: {problems[0].text}")
        elif key == "expression.sentiment":
            parse_lexicon(_yaml(path, key), str(path))
        elif key == "expression.hints":
            parse_hints(_yaml(path, key), str(path))
        elif key == "expression.servo_map":
            parse_servo_map(_read(path, key), str(path))
        elif key == "xiaozhi.device_actions":
            _yaml(path, key)  # bad rows are only skipped (logged with their line) when loaded
        else:
            _read(path, key)
    except ConfigError as exc:
        text = exc.text.removeprefix("replies error: ")
        text = text if text.startswith(f"{key}:") else f"{key}: {text}"
        raise ConfigError(text) from None


def configured_files(cfg: GatewayConfig) -> list[tuple[str, Path]]:
    """(config key, path) of every file `gateway run` reads at start-up."""
    e = cfg.expression
    files = [("brain.replies", cfg.path(cfg.brain.replies)),
             ("expression.action_rules", cfg.path(e.action_rules)),
             ("expression.sentiment", cfg.path(e.sentiment)),
             ("expression.hints", cfg.path(e.hints)),
             ("expression.servo_map", cfg.path(e.servo_map))]
    if cfg.xiaozhi.enabled:
        files.append(("xiaozhi.device_actions", cfg.path(cfg.xiaozhi.device_actions)))
    return files  # (screens.cert / screens.key are made at start-up when both are missing)


def file_problems(cfg: GatewayConfig) -> list[str]:
    """One line per configured file that is missing or invalid (and the embedded MQTT broker's
    program, mosquitto, when it is needed and not installed)."""
    from gateway.links.mosquitto import INSTALL_HINT, find_mosquitto

    problems = []
    for key, path in configured_files(cfg):
        try:
            _check_file(key, path)
        except ConfigError as exc:
            problems.append(exc.text)
    if cfg.mqtt.enabled and not cfg.mqtt.host and find_mosquitto() is None:
        problems.append(f"mqtt.host is empty, so {INSTALL_HINT} (or set mqtt.host to an external broker, "
                        "or mqtt.enabled: false)")
    return problems


def serial_notes(cfg: GatewayConfig) -> list[str]:
    """Serial ports not plugged in (yet): not an error, the link opens each when it appears."""
    return [f"serial {p.port}: not present yet; the gateway opens it when it appears"
            for p in cfg.serial.ports if "://" not in p.port and not Path(p.port).exists()]
