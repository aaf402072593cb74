"""Console sessions survive a gateway restart (kept hashed beside the password file), and a
logout or a password change still ends them, also across a restart. Two gateways in turn on the
same data folder (fake engines, real databases)."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from gateway.app import Gateway
from gateway.config import parse_config
from gateway.console.password import PasswordFile
from gateway.console.sessions import cookie_token
from gateway.screens.server import ScreensServer
from tests.console.conftest import PASSWORD, ROOT, Client

pytestmark = pytest.mark.asyncio(loop_scope="session")


def _config(data: Path):
    return parse_config({
        "devices": {"database": str(data / "gateway.db")},
        "console": {"password_file": str(data / "console-password")},
        "memory": {"enabled": False},
    }, ROOT)


@asynccontextmanager
async def _gateway(data: Path, fake_runner) -> AsyncIterator[str]:
    """A gateway with its screen server (and console) on a free port: yields its host:port."""
    cfg = _config(data)
    screens = ScreensServer("127.0.0.1", 0, "/screen", key="sessions-test-key")
    gateway = Gateway(cfg, fake_runner, [screens])
    ready = asyncio.Event()
    task = asyncio.create_task(gateway.serve(ready))
    waiting = asyncio.create_task(ready.wait())
    await asyncio.wait([waiting, task], timeout=60, return_when=asyncio.FIRST_COMPLETED)
    if not ready.is_set():
        waiting.cancel()
        task.cancel()
        raise RuntimeError(f"the gateway did not start: {task.exception() if task.done() else 'not ready in 60 s'}")
    try:
        yield f"127.0.0.1:{screens.port}"
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_a_session_survives_a_restart_and_logout_or_a_new_password_end_it(tmp_path, fake_runner) -> None:
    password = PasswordFile(tmp_path / "console-password")
    password.set(PASSWORD)
    async with _gateway(tmp_path, fake_runner) as host:
        kept, leaving, other = Client(host), Client(host), Client(host)
        for c in (kept, leaving, other):
            assert (await c.login()).status == 200
    stored = sqlite3.connect(tmp_path / "console-password-sessions.db").execute(
        "SELECT token_sha256 FROM sessions").fetchall()
    assert len(stored) == 3
    assert all(cookie_token(c.cookie) not in {row[0] for row in stored} for c in (kept, leaving, other))  # hashed

    async with _gateway(tmp_path, fake_runner) as host:  # restarted: same cookies, same CSRF tokens
        for c in (kept, leaving, other):
            c.host = host
        assert (await kept.request("GET", "/console/api/devices")).status == 200
        session = (await kept.request("GET", "/console/api/session")).json()
        assert session["csrf"] == kept.csrf
        assert (await leaving.request("POST", "/console/api/logout", {})).status == 200
        assert (await leaving.request("GET", "/console/api/devices")).status == 401

    async with _gateway(tmp_path, fake_runner) as host:  # the logout holds across a restart
        for c in (kept, leaving, other):
            c.host = host
        assert (await leaving.request("GET", "/console/api/devices")).status == 401
        assert (await kept.request("GET", "/console/api/devices")).status == 200
        password.set("a brand new password")
        assert (await kept.request("GET", "/console/api/devices")).status == 401
        fresh = Client(host)
        assert (await fresh.login("a brand new password")).status == 200

    async with _gateway(tmp_path, fake_runner) as host:  # older passwords' sessions stay ended
        assert (await Client(host, cookie=other.cookie).request("GET", "/console/api/devices")).status == 401
        fresh.host = host
        assert (await fresh.request("GET", "/console/api/devices")).status == 200
    rows = sqlite3.connect(tmp_path / "console-password-sessions.db").execute("SELECT COUNT(*) FROM sessions").fetchone()
    assert rows == (1,)  # the new password's login removed the rows of the old one


async def test_a_broken_sessions_file_logs_everyone_out_and_the_gateway_goes_on(tmp_path, fake_runner, caplog) -> None:
    PasswordFile(tmp_path / "console-password").set(PASSWORD)
    (tmp_path / "console-password-sessions.db").write_bytes(b"this is not a database" * 100)
    async with _gateway(tmp_path, fake_runner) as host:
        c = Client(host)
        assert (await c.login()).status == 200  # works until the restart
        assert (await c.request("GET", "/console/api/devices")).status == 200
    assert "sessions file" in caplog.text
