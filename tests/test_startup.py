"""`gateway run` never hangs on start-up: a taken port or a broken file stops it at once (before
the models load) with one line naming the port or file and the config key; SIGTERM, at any
moment, ends it with "stopped", exit 0 and no traceback. Real processes, temporary configs."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from gateway.app import Gateway
from gateway.cli.run import _serve
from gateway.config import parse_config
from gateway.links.websocket import WebSocketLink

ROOT = Path(__file__).resolve().parents[1]
GATEWAY = [sys.executable, "-m", "gateway"]
EXIT_TIMEOUT_S = 60  # generous bound on a busy 2-core machine; a hang is what this catches


def _free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _config(tmp_path: Path, **sections: dict) -> Path:
    """A gateway.yaml on 127.0.0.1 with any free ports, the repository's models and config files,
    no memory (so no embedding model), and the given sections merged in."""
    conf = {
        "server": {"host": "127.0.0.1", "websocket_port": 0},
        "models": {"dir": str(ROOT / "models"), "manifest": str(ROOT / "models/manifest.yaml")},
        "brain": {"replies": str(ROOT / "config/replies.yaml")},
        "expression": {name: str(ROOT / "config" / file) for name, file in (
            ("action_rules", "action_rules.csv"), ("sentiment", "sentiment.yaml"),
            ("servo_map", "servo_map.yaml"), ("hints", "hints.yaml"))},
        "screens": {"host": "127.0.0.1", "port": 0},
        "xiaozhi": {"emotions": str(ROOT / "config/xiaozhi_emotions.yaml"),
                    "device_actions": str(ROOT / "config/device_actions.yaml")},
        "memory": {"enabled": False},
        "mqtt": {"port": 0},
        "coap": {"port": _free_udp_port()},
        "devices": {"database": str(tmp_path / "gateway.db")},
    }
    for name, values in sections.items():
        conf[name] = {**conf.get(name, {}), **values}
    path = tmp_path / "gateway.yaml"
    path.write_text(yaml.safe_dump(conf))
    return path


@pytest.fixture
def held_tcp_port() -> Iterator[int]:
    """A port some other program listens on (here: this test process, with a plain socket)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s.getsockname()[1]


def _run(config: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*GATEWAY, "--config", str(config), "run"], cwd=ROOT, capture_output=True,
                          text=True, timeout=EXIT_TIMEOUT_S)


@pytest.mark.parametrize("section, key", [("server", "websocket_port"), ("screens", "port"), ("mqtt", "port")])
def test_a_taken_port_stops_start_up_before_the_models_load_naming_port_key_and_holder(
        tmp_path, held_tcp_port, section, key):
    res = _run(_config(tmp_path, **{section: {key: held_tcp_port}}))
    assert res.returncode == 1, res.stderr
    errors = [line for line in res.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, res.stderr
    assert f"127.0.0.1:{held_tcp_port}" in errors[0]
    assert f"{section}.{key}" in errors[0]
    assert f"pid {os.getpid()}" in errors[0]
    assert "loading models" not in res.stderr
    assert "Traceback" not in res.stderr


def test_a_taken_coap_port_stops_start_up_naming_the_udp_port_and_its_key(tmp_path):
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as held:
        held.bind(("127.0.0.1", 0))
        port = held.getsockname()[1]
        res = _run(_config(tmp_path, coap={"port": port}))
    assert res.returncode == 1, res.stderr
    assert f"CoAP (UDP) port 127.0.0.1:{port} is in use by pid {os.getpid()}" in res.stderr
    assert "coap.port" in res.stderr
    assert "loading models" not in res.stderr


def test_a_missing_replies_file_stops_start_up_at_once_naming_the_file_and_key(tmp_path):
    missing = tmp_path / "no-replies.yaml"
    res = _run(_config(tmp_path, brain={"replies": str(missing)}))
    assert res.returncode == 2, res.stderr
    assert f"error: brain.replies: cannot read {missing}" in res.stderr
    assert "loading models" not in res.stderr
    assert "Traceback" not in res.stderr


def test_a_broken_servo_map_stops_start_up_naming_the_file_and_key(tmp_path):
    broken = tmp_path / "servo_map.yaml"
    broken.write_text("channels: [unclosed\n")
    res = _run(_config(tmp_path, expression={"servo_map": str(broken)}))
    assert res.returncode == 2, res.stderr
    assert "error: expression.servo_map:" in res.stderr and str(broken) in res.stderr
    assert "loading models" not in res.stderr


def _start(config: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([*GATEWAY, "--config", str(config), "run"], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _wait_for_line(stream, needle: str, seen: list[str]) -> bool:
    """Read `stream` until a line contains `needle` (True) or it ends (False); lines go to `seen`."""
    for line in stream:
        seen.append(line)
        if needle in line:
            return True
    return False


def _stop_with_sigterm(proc: subprocess.Popen[str], seen_err: list[str]) -> tuple[int, str]:
    proc.send_signal(signal.SIGTERM)
    try:
        _, err = proc.communicate(timeout=EXIT_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise
    return proc.returncode, "".join(seen_err) + err


@pytest.mark.models
def test_sigterm_while_the_models_load_exits_0_with_stopped_and_no_traceback(tmp_path):
    proc = _start(_config(tmp_path))
    seen: list[str] = []
    # "loaded vad" comes first; the ASR and TTS are still loading (whichever moment it lands in,
    # the outcome must be the same).
    assert _wait_for_line(proc.stderr, "loaded vad", seen), "".join(seen)
    code, err = _stop_with_sigterm(proc, seen)
    assert code == 0, err
    assert err.rstrip().endswith("stopped"), err
    assert "Traceback" not in err and "never retrieved" not in err, err


@pytest.mark.models
def test_sigterm_after_gateway_ready_exits_0_with_stopped_and_no_traceback(tmp_path):
    proc = _start(_config(tmp_path))
    seen_out: list[str] = []
    err_lines: list[str] = []
    drain = threading.Thread(target=lambda: err_lines.extend(proc.stderr), daemon=True)
    drain.start()  # stderr must not fill up while the test waits on stdout
    assert _wait_for_line(proc.stdout, "Gateway ready", seen_out), "".join(err_lines)
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=EXIT_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise
    drain.join(EXIT_TIMEOUT_S)
    err = "".join(err_lines)
    assert proc.returncode == 0, err
    assert err.rstrip().endswith("stopped"), err
    assert "Traceback" not in err and "never retrieved" not in err, err


async def test_a_link_that_cannot_listen_after_the_models_loaded_ends_serving_with_its_error(
        tmp_path, held_tcp_port, fake_runner):
    """The race: free when checked, taken when the link binds. `gateway run`'s serving ends with the
    OSError (it then prints one line) instead of waiting for `ready` forever."""
    cfg = parse_config({"devices": {"database": str(tmp_path / "g.db")}, "memory": {"enabled": False}}, ROOT)
    gateway = Gateway(cfg, fake_runner, [WebSocketLink("127.0.0.1", held_tcp_port)])
    with pytest.raises(ExceptionGroup) as caught:
        await asyncio.wait_for(_serve(gateway), EXIT_TIMEOUT_S)
    failed, _ = caught.value.split(OSError)
    assert failed is not None, caught.value
