"""`gateway console password --stdin` and `gateway console url`, run as a user runs them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from gateway.console.password import PasswordFile

ROOT = Path(__file__).resolve().parents[2]


def _gateway(config: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gateway", "--config", str(config), "console", *args], input=stdin,
                          capture_output=True, text=True, cwd=ROOT, timeout=60)


def test_console_password_from_stdin_is_stored_hashed_and_a_short_one_changes_nothing(tmp_path) -> None:
    config = tmp_path / "gateway.yaml"
    config.write_text("console:\n  password_file: secret/pw\nscreens:\n  port: 9999\n  tls: false\n")
    done = _gateway(config, "password", "--stdin", stdin="a long enough password\n")
    assert done.returncode == 0, done.stderr
    assert "console password set" in done.stdout and "http://" in done.stdout and ":9999/console" in done.stdout
    store = PasswordFile(tmp_path / "secret" / "pw")
    assert store.verify("a long enough password") and "a long enough password" not in store.stored()
    short = _gateway(config, "password", "--stdin", stdin="short\n")
    assert short.returncode == 2 and "at least 8 characters; nothing changed" in short.stderr
    assert store.verify("a long enough password")
    url = _gateway(config, "url")
    assert url.returncode == 0 and url.stdout.strip().splitlines()[-1] == "http://127.0.0.1:9999/console"
