"""The command line as a user runs it: `gateway run` in one process, `gateway simulate` in another."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GATEWAY = [sys.executable, "-m", "gateway"]


def run_cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*GATEWAY, *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def running_gateway():
    """`gateway run --port 0` as a subprocess; yields the URL it prints."""
    proc = subprocess.Popen([*GATEWAY, "run", "--port", "0", "--host", "127.0.0.1"], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    url = None
    deadline = time.monotonic() + 120
    lines = []
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
        if m := re.search(r"(ws://127\.0\.0\.1:\d+/ws)", line):
            url = m.group(1)
            break
    if url is None:
        proc.kill()
        pytest.fail("gateway run did not print its URL:\n" + "".join(lines))
    yield url
    proc.terminate()
    proc.wait(timeout=10)


@pytest.mark.models
def test_simulate_against_gateway_run_prints_the_json_events_and_saves_the_reply(running_gateway, tmp_path):
    out = tmp_path / "reply.wav"
    res = run_cli("simulate", "--say", "What time is it?", "--url", running_gateway, "--json",
                  "--out", str(out), "--speed", "2")
    assert res.returncode == 0, res.stderr
    events = [json.loads(line) for line in res.stdout.splitlines() if line.startswith("{")]
    by_name = {e["event"]: e for e in events}
    for name in ("connected", "speech_end", "transcript", "reply_text", "first_audio", "reply_end"):
        assert name in by_name, (name, events)
    assert by_name["transcript"]["text"].lower().strip("?. ") == "what time is it"
    assert by_name["reply_text"]["text"].startswith("It is")
    assert by_name["first_audio"]["ms"] > 0
    assert by_name["reply_end"]["audio_seconds"] > 0.5
    assert out.stat().st_size > 16000  # > 0.5 s of 16 kHz 16-bit audio


def test_simulate_exits_2_with_a_clear_message_when_nothing_listens(tmp_path):
    wav = tmp_path / "q.wav"
    from gateway.cli.virtual_box import write_wav

    write_wav(wav, b"\x00\x00" * 1600, 16000)
    res = run_cli("simulate", "--wav", str(wav), "--url", "ws://127.0.0.1:9/ws", "--timeout", "5")
    assert res.returncode == 2
    assert "cannot connect to ws://127.0.0.1:9/ws" in res.stderr
    assert "gateway run" in res.stderr


def test_a_bad_config_value_stops_start_up_naming_key_value_and_allowed_range(tmp_path):
    bad = tmp_path / "gateway.yaml"
    bad.write_text("vad:\n  trailing_silence_ms: -5\n")
    res = run_cli("--config", str(bad), "run")
    assert res.returncode == 2
    assert "vad.trailing_silence_ms = -5" in res.stderr
    assert "greater than or equal to 100" in res.stderr


def test_help_explains_every_command():
    res = run_cli("--help")
    assert res.returncode == 0
    for command in ("run", "simulate", "doctor", "models", "bench"):
        assert command in res.stdout


def _doctor_config(tmp_path: Path, **sections: dict) -> Path:
    """A config whose ports cannot clash (0: any free port) and whose models are not prepared (no engine loads)."""
    shipped = {"expression": {k: str(ROOT / "config" / f) for k, f in (
        ("action_rules", "action_rules.csv"), ("sentiment", "sentiment.yaml"), ("hints", "hints.yaml"),
        ("servo_map", "servo_map.yaml"))},
        "xiaozhi": {"device_actions": str(ROOT / "config" / "device_actions.yaml")},
        "brain": {"replies": str(ROOT / "config" / "replies.yaml")}}
    cfg = {"server": {"host": "127.0.0.1", "websocket_port": 0}, "screens": {"host": "127.0.0.1", "port": 0},
           "mqtt": {"enabled": False}, "coap": {"enabled": False},
           "models": {"dir": str(tmp_path / "models"), "manifest": str(ROOT / "models" / "manifest.yaml")}}
    for name, section in {**shipped, **sections}.items():
        cfg[name] = {**cfg.get(name, {}), **shipped.get(name, {}), **section}
    path = tmp_path / "gateway.yaml"
    path.write_text(json.dumps(cfg), encoding="utf-8")  # JSON is YAML
    return path


def test_doctor_fails_on_a_missing_replies_file_naming_the_key_and_the_path(tmp_path):
    missing = tmp_path / "nowhere" / "replies.yaml"
    res = run_cli("--config", str(_doctor_config(tmp_path, brain={"replies": str(missing)})), "doctor")
    assert res.returncode == 1
    assert f"FAIL brain.replies: cannot read {missing}: No such file or directory" in res.stdout
    assert "Traceback" not in res.stdout + res.stderr


def test_doctor_fails_on_a_broken_sentiment_file_and_passes_the_shipped_files(tmp_path):
    from gateway.cli.doctor import checks_without_engines
    from gateway.config import load_config

    res = run_cli("--config", str(_doctor_config(tmp_path)), "doctor")
    assert "OK   files: brain.replies, expression.action_rules, expression.sentiment, expression.hints" in res.stdout
    broken = tmp_path / "sentiment.yaml"
    broken.write_text("words: [\n", encoding="utf-8")
    cfg = load_config(_doctor_config(tmp_path, expression={"sentiment": str(broken)}))
    failed = [c.what for c in checks_without_engines(cfg) if c.status == "FAIL"]  # the console's health page
    assert any(what.startswith(f"expression.sentiment: {broken} is not valid YAML") for what in failed), failed


def test_simulate_without_url_connects_to_the_port_and_path_of_the_config(tmp_path):
    import threading

    from websockets.sync.server import serve

    from gateway.cli.virtual_box import write_wav

    paths: list[str] = []

    def handler(ws):  # a real WebSocket peer: note where the box came, then hang up
        paths.append(ws.request.path)
        ws.close()

    with serve(handler, "127.0.0.1", 0) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        port = server.socket.getsockname()[1]
        config = tmp_path / "gateway.yaml"
        config.write_text(f"server: {{host: 0.0.0.0, websocket_port: {port}, websocket_path: /box-ws}}\n")
        wav = tmp_path / "q.wav"
        write_wav(wav, b"\x00\x00" * 1600, 16000)
        res = run_cli("--config", str(config), "simulate", "--wav", str(wav), "--timeout", "5")
        server.shutdown()
    assert paths == ["/box-ws"], res.stderr
    assert res.returncode == 2 and "Traceback" not in res.stderr


def test_simulates_default_url_follows_the_configs_ports_and_listen_address():
    from gateway.cli.simulate import default_url
    from gateway.config import parse_config

    cfg = parse_config({"server": {"websocket_port": 9100, "websocket_path": "/v"}, "mqtt": {"port": 9101,
                        "topic_prefix": "home"}, "coap": {"port": 9102}, "serial": {"ports": [{"port": "/dev/ttyX"}]}})
    assert [default_url(cfg, t) for t in ("ws", "mqtt", "coap", "serial")] == [
        "ws://127.0.0.1:9100/v", "mqtt://127.0.0.1:9101/home", "coap://127.0.0.1:9102/gw", "/dev/ttyX"]
    one = parse_config({"server": {"host": "192.168.1.20"}, "mqtt": {"host": "broker.lan"}})
    assert default_url(one, "ws") == "ws://192.168.1.20:8765/ws"
    assert default_url(one, "mqtt") == "mqtt://broker.lan:1883/gw"  # an external broker
    assert default_url(parse_config({"server": {"host": "::1"}}), "coap") == "coap://[::1]:5683/gw"
    assert default_url(parse_config({"server": {"host": "::"}}), "ws") == "ws://127.0.0.1:8765/ws"


def test_simulate_against_an_absent_coap_gateway_is_a_clear_error_not_a_traceback(tmp_path):
    import socket

    from gateway.cli.virtual_box import write_wav

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # free again after the block: nothing answers there
    wav = tmp_path / "q.wav"
    write_wav(wav, b"\x00\x00" * 1600, 16000)
    res = run_cli("simulate", "--wav", str(wav), "--transport", "coap", "--url", f"coap://127.0.0.1:{port}",
                  "--timeout", "5")
    assert res.returncode == 2, res.stderr
    assert f"no Welcome from coap://127.0.0.1:{port}: CoAP request failed" in res.stderr
    assert "Traceback" not in res.stderr


def test_run_refuses_a_port_flag_that_meets_another_listener_before_loading_models(tmp_path):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = _doctor_config(tmp_path, screens={"port": port}, models={"dir": str(ROOT / "models")})
    res = run_cli("--config", str(config), "run", "--port", str(port))
    assert res.returncode == 2, res.stderr
    assert f"error: server.websocket_port and screens.port are both TCP port {port} on 127.0.0.1: give each its " \
           "own port" in res.stderr
    assert "loading models" not in res.stderr


def _commands() -> dict:
    import argparse

    from gateway.cli.main import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices


@pytest.mark.parametrize("command", sorted(_commands()))
def test_every_commands_help_describes_what_it_does(command):
    parser = _commands()[command]
    assert parser.description and len(parser.description) > 40, f"`gateway {command} --help` has no description"


def _actions() -> dict:
    import argparse

    found = {}
    for name, parser in _commands().items():
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                found.update({f"{name} {sub}": child for sub, child in action.choices.items()})
    return found


def test_the_commands_have_actions_to_check():
    assert {"devices add", "models prepare", "service install", "readings prune", "console password"} <= set(_actions())


@pytest.mark.parametrize("action", sorted(_actions()))
def test_every_actions_help_describes_what_it_does(action):
    parser = _actions()[action]
    assert parser.description and len(parser.description) > 60, f"`gateway {action} --help` has no description"


def test_help_shows_the_defaults_and_doctors_exit_codes():
    res = run_cli("doctor", "--help")
    assert "Exit code 0 when nothing FAILs" in " ".join(res.stdout.split())
    memory = " ".join(run_cli("memory", "--help").stdout.split())
    assert "-n N how many results (default: 10)" in memory
    assert "{search,add,recent,export,import,reflect}" in memory
    top = " ".join(run_cli("--help").stdout.split())
    assert "Moonshine on onnxruntime" in top and "sherpa-onnx" not in top
