"""Real peers for the link tests: a mosquitto broker started by the tests on a free loopback port."""

from __future__ import annotations

import getpass
import shutil
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Mosquitto:
    """mosquitto with a generated config: loopback only, persistence on, logs to stderr."""

    def __init__(self, tmp: Path) -> None:
        self.port = free_port()
        self.dir = tmp
        self.conf = tmp / "mosquitto.conf"
        self.conf.write_text(
            f"listener {self.port} 127.0.0.1\nallow_anonymous true\npersistence true\n"
            f"user {getpass.getuser()}\n"  # as root, mosquitto would switch to user mosquitto
            f"persistence_location {tmp}/\nlog_dest stderr\nlog_type error\nlog_type warning\nlog_type information\n"
        )
        self.proc: subprocess.Popen[str] | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(["mosquitto", "-c", str(self.conf)], stderr=subprocess.PIPE, text=True)
        assert self.proc.stderr is not None
        for line in self.proc.stderr:  # "mosquitto version 2.0.11 running" once it listens
            if " running" in line:
                return
        raise RuntimeError(f"mosquitto did not start (exit code {self.proc.wait(5)})")

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()  # SIGTERM: mosquitto saves its persistent sessions
            self.proc.wait(10)
            self.proc = None


@pytest.fixture
def mosquitto(tmp_path: Path) -> Iterator[Mosquitto]:
    if shutil.which("mosquitto") is None:
        pytest.skip("needs mosquitto (Debian packages mosquitto, mosquitto-clients)")
    broker = Mosquitto(tmp_path)
    broker.start()
    yield broker
    broker.stop()


def documented_acl() -> str:
    """The mosquitto ACL exactly as docs/MQTT.md gives it to users."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "MQTT.md").read_text(encoding="utf-8")
    start = doc.index("# /etc/mosquitto/gateway.acl")
    return doc[start : doc.index("```", start)]


class SecuredMosquitto(Mosquitto):
    """mosquitto configured as docs/MQTT.md says: no anonymous logins, one password per device, the ACL."""

    def __init__(self, tmp: Path, logins: dict[str, str]) -> None:
        super().__init__(tmp)
        passwd, acl = tmp / "gateway.passwd", tmp / "gateway.acl"
        passwd.touch(mode=0o600)
        for user, password in logins.items():
            subprocess.run(["mosquitto_passwd", "-b", str(passwd), user, password], check=True)
        acl.write_text(documented_acl())
        self.conf.write_text(self.conf.read_text().replace("allow_anonymous true", "allow_anonymous false")
                             + f"password_file {passwd}\nacl_file {acl}\n")
