"""gateway doctor beside a running `gateway run` (as the README suggests): the ports it holds are OK
when it answers on them; a port held by anything else still FAILs naming the process; a corrupted
prepared model says which prepare command fixes it."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from gateway.cli.doctor import run_doctor
from gateway.cli.ports import is_gateway_run
from gateway.config import GatewayConfig, load_config
from gateway.engines.store import ModelStore

REPO = Path(__file__).resolve().parents[2]


def _free_port(kind: int = socket.SOCK_STREAM) -> int:
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _write_config(path: Path, models_dir: Path) -> Path:
    """A gateway.yaml on free loopback ports, its data in path's folder, the checkout's rule files."""
    cfg = {
        "server": {"host": "127.0.0.1", "websocket_port": _free_port()},
        "models": {"dir": str(models_dir), "manifest": str(REPO / "models" / "manifest.yaml")},
        "brain": {"replies": str(REPO / "config" / "replies.yaml")},
        "expression": {k: str(REPO / "config" / f) for k, f in (
            ("action_rules", "action_rules.csv"), ("sentiment", "sentiment.yaml"),
            ("servo_map", "servo_map.yaml"), ("hints", "hints.yaml"))},
        "xiaozhi": {k: str(REPO / "config" / f) for k, f in (
            ("emotions", "xiaozhi_emotions.yaml"), ("device_actions", "device_actions.yaml"))},
        "screens": {"host": "127.0.0.1", "port": _free_port()},
        "mqtt": {"port": _free_port()},
        "coap": {"port": _free_port(socket.SOCK_DGRAM)},
        "devices": {"database": "gateway.db"},
        "memory": {"enabled": False},
    }
    path.write_text(yaml.safe_dump(cfg))
    return path


@pytest.fixture(scope="module")
def beside_gateway(prepared_cfg: GatewayConfig, tmp_path_factory: pytest.TempPathFactory
                   ) -> Iterator[tuple[GatewayConfig, int]]:
    """`gateway run` started on a temp config (free ports); yields (that config, its pid)."""
    config = _write_config(tmp_path_factory.mktemp("beside") / "gateway.yaml", prepared_cfg.models.dir)
    proc = subprocess.Popen([sys.executable, "-m", "gateway", "--config", str(config), "run"], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
        if line.startswith("Stop with Ctrl+C"):  # the last line of the ready banner
            break
    if not lines or not lines[-1].startswith("Stop with Ctrl+C"):
        proc.kill()
        pytest.fail("gateway run did not get ready:\n" + "".join(lines))
    yield load_config(config), proc.pid
    proc.terminate()
    proc.wait(timeout=30)


@pytest.mark.models
def test_doctor_beside_a_running_gateway_reports_its_ports_answering_and_exits_0(beside_gateway) -> None:
    cfg, pid = beside_gateway
    lines: list[str] = []
    assert run_doctor(cfg, lines.append) == 0, "\n".join(lines)
    text = "\n".join(lines)
    assert not any(line.startswith("FAIL") for line in lines), text
    held = f"is held by the running gateway (pid {pid})"
    assert re.search(rf"OK   WebSocket port 127\.0\.0\.1:{cfg.server.websocket_port} {re.escape(held)}, "
                     r"answers ping and hello in \d+ ms", text), text
    assert f"OK   screens port 127.0.0.1:{cfg.screens.port} {held}, answers GET / in" in text
    assert f"OK   embedded MQTT broker port 127.0.0.1:{cfg.mqtt.port} {held}, answers MQTT CONNECT in" in text
    assert f"OK   CoAP (UDP) port 127.0.0.1:{cfg.coap.port} {held}, answers a CoAP ping in" in text


@pytest.mark.models
def test_a_port_held_by_a_plain_socket_still_fails_naming_its_process(prepared_cfg: GatewayConfig,
                                                                      make_config) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        cfg = make_config(prepared_cfg.models.dir, server={"host": "127.0.0.1", "websocket_port": port})
        lines: list[str] = []
        assert run_doctor(cfg, lines.append) == 1
    text = "\n".join(lines)
    name = Path(f"/proc/{os.getpid()}/comm").read_text().strip()
    assert f"FAIL WebSocket port 127.0.0.1:{port} is in use by pid {os.getpid()} ({name})" in text
    assert "-> stop that process or set server.websocket_port" in text
    assert "held by" not in text


@pytest.mark.models
def test_a_corrupted_model_file_fails_and_says_which_prepare_command_fixes_it(
        prepared_cfg: GatewayConfig, make_config, tmp_path: Path) -> None:
    src = prepared_cfg.path(prepared_cfg.models.dir) / "prepared" / "silero-vad"
    dest = tmp_path / "prepared" / "silero-vad"
    shutil.copytree(src, dest, symlinks=False)  # real copies: the package's own file stays intact
    model = dest / "silero_vad.onnx"
    data = bytearray(model.read_bytes())
    data[len(data) // 2] ^= 0xFF
    model.write_bytes(bytes(data))
    cfg = make_config(tmp_path, server={"host": "127.0.0.1", "websocket_port": _free_port()})
    lines: list[str] = []
    assert run_doctor(cfg, lines.append) == 1
    text = "\n".join(lines)
    assert "FAIL model silero-vad: silero_vad.onnx: sha256" in text and "does not match the manifest" in text
    assert "-> run `gateway models prepare silero-vad`" in text
    ModelStore(cfg).prepare("silero-vad")  # the advice works
    assert ModelStore(cfg).verify("silero-vad") == []


@pytest.mark.parametrize("cmdline, expected", [
    (["/srv/gw/.venv/bin/python", "-m", "gateway", "run", "--port", "0"], True),
    (["/srv/gw/.venv/bin/gateway", "--config", "/srv/gw/gateway.yaml", "run"], True),
    (["/usr/bin/python3", "/srv/gw/.venv/bin/gateway", "-v", "run"], True),
    (["/srv/gw/.venv/bin/gateway", "simulate", "--say", "run"], False),
    (["python", "-m", "pytest", "gateway", "run"], False),
    (["nc", "-l", "8765"], False),
    # under qemu-user via binfmt_misc: the emulator, the program's path, (flag P) its argv[0]
    (["/usr/libexec/qemu-binfmt/aarch64-binfmt-P", "/srv/gw/.venv/bin/python", "/srv/gw/.venv/bin/python", "-m",
      "gateway", "run"], True),
    (["/usr/bin/qemu-aarch64-static", "/srv/gw/.venv/bin/gateway", "run"], True),
    (["/usr/bin/qemu-aarch64-static", "/usr/bin/python3", "python3", "-m", "pytest", "gateway", "run"], False),
])
def test_only_the_command_line_of_gateway_run_counts_as_a_running_gateway(cmdline, expected) -> None:
    assert is_gateway_run(cmdline) is expected
