"""The console's guard on its own (unit tests, own logic): the Secure cookie and the Origin scheme
follow the request's TLS, plain http from another machine is refused when https is offered,
sessions expire, and the login throttle doubles the wait."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gateway.console.password import PasswordError, PasswordFile, hash_password, matches
from gateway.console.server import ConsoleServer
from gateway.console.sessions import Sessions
from gateway.console.throttle import LoginThrottle
from gateway.links.http_front import HttpRequest
from websockets.datastructures import Headers

from tests.clock import Clock

HOST = "gw.local:8767"


def _server(tmp_path: Path, *, tls_available: bool) -> ConsoleServer:
    password = PasswordFile(tmp_path / "pw")
    password.set("right password")
    return ConsoleServer(password, Sessions(3600), LoginThrottle(3), {}, tls_available=tls_available)


def _login(origin: str, *, secure: bool, remote: str = "192.168.1.20") -> HttpRequest:
    headers = Headers({"Host": HOST, "Origin": origin, "Content-Type": "application/json"})
    return HttpRequest("POST", "/console/api/login", headers, json.dumps({"password": "right password"}).encode(),
                       ("192.168.1.2", 8767), (remote, 50000), "", secure)


async def test_over_https_the_cookie_is_secure_and_the_origin_must_be_https(tmp_path) -> None:
    server = _server(tmp_path, tls_available=True)
    ok = await server.http(_login(f"https://{HOST}", secure=True))
    assert ok.status == 200
    cookie = dict(ok.headers)["Set-Cookie"]
    assert "; Secure" in cookie and "HttpOnly" in cookie and "SameSite=Strict" in cookie
    assert (await server.http(_login(f"http://{HOST}", secure=True))).status == 403


async def test_plain_http_from_another_machine_is_refused_when_https_is_offered(tmp_path) -> None:
    server = _server(tmp_path, tls_available=True)
    refused = await server.http(_login(f"http://{HOST}", secure=False))
    assert refused.status == 403 and b"use the https address" in refused.body
    local = await server.http(_login(f"http://{HOST}", secure=False, remote="127.0.0.1"))
    assert local.status == 200 and "Secure" not in dict(local.headers)["Set-Cookie"]
    plain_only = _server(tmp_path / "plain", tls_available=False)  # screens.tls off: http is all there is
    assert (await plain_only.http(_login(f"http://{HOST}", secure=False))).status == 200


async def test_a_session_ends_at_its_expiry_or_when_the_password_changes() -> None:
    clock = Clock()
    sessions = Sessions(60, clock)
    s = await sessions.create("hash-1")
    assert sessions.get(s.token, "hash-1") == s
    assert sessions.get(s.token, "hash-2") is None  # the password changed: gone for good
    assert sessions.get(s.token, "hash-1") is None
    t = await sessions.create("hash-1")
    clock.now += 61
    assert sessions.get(t.token, "hash-1") is None


def test_the_throttle_locks_out_after_the_limit_and_doubles_the_wait() -> None:
    clock = Clock()
    throttle = LoginThrottle(2, clock)
    assert throttle.failed("10.0.0.9") == 0
    assert throttle.failed("10.0.0.9") == 60
    assert throttle.retry_after("10.0.0.8") == 0  # per peer
    clock.now += 61
    assert throttle.retry_after("10.0.0.9") == 0
    assert throttle.failed("10.0.0.9") == 120
    throttle.succeeded("10.0.0.9")
    assert throttle.retry_after("10.0.0.9") == 0


def test_passwords_are_stored_salted_and_hashed_and_short_ones_refused(tmp_path) -> None:
    a, b = hash_password("same password"), hash_password("same password")
    assert a != b and "same password" not in a and a.startswith("scrypt$")
    assert matches(a, "same password") and not matches(a, "other password")
    with pytest.raises(PasswordError):
        hash_password("short")
    store = PasswordFile(tmp_path / "pw")
    store.set("a good password")
    assert (tmp_path / "pw").stat().st_mode & 0o777 == 0o600
    assert store.verify("a good password") and not store.verify("a bad password")
    (tmp_path / "pw").write_text("garbage\n")
    with pytest.raises(PasswordError, match="gateway console password"):
        store.verify("a good password")


async def test_a_route_that_fails_is_a_500_with_the_reason_and_the_console_goes_on(tmp_path, caplog) -> None:
    async def broken(request):
        raise RuntimeError("the disk is gone")

    async def fine(request):
        return {"ok": True}

    password = PasswordFile(tmp_path / "pw")
    password.set("right password")
    server = ConsoleServer(password, Sessions(3600), LoginThrottle(3), {("GET", "broken"): broken, ("GET", "fine"): fine},
                           tls_available=False)
    login = await server.http(_login(f"http://{HOST}", secure=False))
    cookie = dict(login.headers)["Set-Cookie"].split(";", 1)[0]

    def get(path: str) -> HttpRequest:
        return HttpRequest("GET", f"/console/api/{path}", Headers({"Host": HOST, "Cookie": cookie}), b"",
                           ("192.168.1.2", 8767), ("192.168.1.20", 50000))

    failed = await server.http(get("broken"))
    assert failed.status == 500 and b"the disk is gone" in failed.body
    assert "GET /console/api/broken failed" in caplog.text
    assert (await server.http(get("fine"))).status == 200


def test_ensure_makes_a_password_once_and_then_keeps_it(tmp_path) -> None:
    store = PasswordFile(tmp_path / "data" / "console-password")
    made = store.ensure()
    assert made and len(made) >= 16 and store.verify(made)
    assert store.ensure() is None and store.verify(made)  # printed once: the second run makes none
