"""gateway doctor: one line per check, exit 0 on this machine, FAIL with a fix otherwise."""

from __future__ import annotations

import os
import re
import socket
from pathlib import Path

import pytest

from gateway.config import GatewayConfig
from gateway.cli.doctor import run_doctor

pytestmark = pytest.mark.models


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cfg(make_config, models_dir: Path, port: int) -> GatewayConfig:
    return make_config(models_dir, server={"host": "127.0.0.1", "websocket_port": port})


def test_doctor_passes_here_with_prepared_models_and_a_free_port(
    prepared_cfg: GatewayConfig, make_config
) -> None:
    lines: list[str] = []
    cfg = _cfg(make_config, prepared_cfg.models.dir, _free_port())
    assert run_doctor(cfg, lines.append) == 0, "\n".join(lines)
    assert all(line.split()[0] in {"OK", "WARN", "->"} for line in lines[:-1]), lines
    text = "\n".join(lines)
    assert "OK   engines load in" in text
    assert "OK   model moonshine-base-en: prepared, checksums match" in text
    assert "OK   espeak-ng data bundled with piper" in text
    assert "OK   audio libraries: numpy" in text
    assert "SQLite" in text
    assert re.fullmatch(r"\d+ checks: 0 failed, \d+ warnings", lines[-1])


def test_unprepared_models_fail_and_say_to_run_prepare(tmp_path: Path, make_config) -> None:
    lines: list[str] = []
    assert run_doctor(_cfg(make_config, tmp_path, _free_port()), lines.append) == 1
    text = "\n".join(lines)
    assert "FAIL model silero-vad: not prepared" in text
    assert "-> run `gateway models prepare silero-vad`" in text
    assert "FAIL engines: not loaded" in text
    assert not (tmp_path / "prepared").exists()  # doctor changes nothing


def test_a_busy_port_fails_and_names_the_listening_process(
    prepared_cfg: GatewayConfig, make_config
) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        lines: list[str] = []
        assert run_doctor(_cfg(make_config, prepared_cfg.models.dir, port), lines.append) == 1
    text = "\n".join(lines)
    assert f"FAIL WebSocket port 127.0.0.1:{port} is in use by pid {os.getpid()}" in text
    assert "server.websocket_port" in text


def test_a_busy_mqtt_or_coap_port_fails_and_names_its_config_key(prepared_cfg: GatewayConfig, make_config) -> None:
    with socket.socket() as tcp, socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
        tcp.bind(("127.0.0.1", 0))
        tcp.listen()
        udp.bind(("127.0.0.1", 0))
        mqtt_port, coap_port = tcp.getsockname()[1], udp.getsockname()[1]
        cfg = make_config(prepared_cfg.models.dir, server={"host": "127.0.0.1", "websocket_port": _free_port()},
                          mqtt={"port": mqtt_port}, coap={"port": coap_port})
        lines: list[str] = []
        assert run_doctor(cfg, lines.append) == 1
    text = "\n".join(lines)
    assert f"FAIL embedded MQTT broker port 127.0.0.1:{mqtt_port} is in use by pid {os.getpid()}" in text
    assert f"FAIL CoAP (UDP) port 127.0.0.1:{coap_port} is in use" in text
    assert "mqtt.port" in text and "coap.port" in text



@pytest.mark.parametrize(("asr", "used", "unused"), [
    ({"engine": "whisper"}, {"whisper-tiny-en"}, {"moonshine-base-en"}),
    ({"second_opinion": "whisper"}, {"moonshine-base-en", "whisper-tiny-en"}, set()),
])
def test_an_unprepared_asr_model_the_config_runs_fails_and_one_it_does_not_warns(
    tmp_path: Path, make_config, asr: dict, used: set[str], unused: set[str]
) -> None:
    lines: list[str] = []
    cfg = make_config(tmp_path, server={"host": "127.0.0.1", "websocket_port": _free_port()}, asr=asr)
    assert run_doctor(cfg, lines.append) == 1
    for name in used:
        assert f"FAIL model {name}: not prepared" in lines, lines
    for name in unused:
        assert f"WARN model {name} (not used by this config): not prepared" in lines, lines
