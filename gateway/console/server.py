"""The console's front door, mounted on the screen server under /console (an HttpMount).

    GET  /console                the app (static/index.html); without a session: 401 + the login page
    GET  /console/login.js, /console/console.css   the login page's script and style (no data)
    GET  /console/<page>.js                        the app's scripts: common.js, one per page, chart.js (session needed)
    POST /console/api/login      {"password"} -> a session cookie and {"csrf"}; throttled per peer, and
                                 the password checks running at once bounded (gateway/console/throttle.py)
    POST /console/api/logout
    GET  /console/api/session    {"csrf", "expires_at"}
    WS   /console/api/live       the live conversation updates (gateway/console/api_talk.py)
    *    /console/api/...        the API routes (api_*.py); 401 without a session

Every write (any method but GET) must come from the console's own origin (`Origin` equal to the
scheme and `Host` it was asked on), be JSON, and carry the session's CSRF token in `X-CSRF-Token`;
otherwise 403 and a log line naming the peer. The live WebSocket is refused before its handshake
without a session (401) or from another origin (403), and closed (4401) once its session ends. The session cookie is HttpOnly, SameSite=Strict and,
over https, Secure. When the screen server offers https (`tls_available`), another machine must
use it: its plain-http pages are redirected (gateway/links/web.py) and its writes refused here. Answers carry a strict Content-Security-Policy (no inline script, nothing from
elsewhere) and may not be framed.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
import math
import os
import re
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs

from gateway.console.password import PasswordError, PasswordFile
from gateway.console.routes import ApiError, ApiRequest, FileAnswer, JsonAnswer, Routes
from gateway.console.sessions import Session, Sessions, cookie_header, cookie_token
from gateway.console.throttle import LoginThrottle
from gateway.links.http_front import HttpReply, HttpRequest
from gateway.links.limits import LogThrottle
from gateway.log_safe import log_safe

if TYPE_CHECKING:
    from gateway.links.web import TextSocket

log = logging.getLogger(__name__)

# serves one accepted live socket: (the socket, "is its session still alive?", the peer for the log)
LiveHandler = Callable[["TextSocket", Callable[[], bool], str], Awaitable[None]]
LIVE = "api/live"
SESSION_ENDED = 4401

STATIC = Path(__file__).parent / "static"
PUBLIC = {"login.js": "text/javascript", "console.css": "text/css"}
PRIVATE = {p.name: "text/javascript" for p in sorted(STATIC.glob("*.js")) if p.name not in PUBLIC}  # common.js, a file per page, chart.js
SECURITY = (("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'"),
            ("X-Frame-Options", "DENY"), ("X-Content-Type-Options", "nosniff"), ("Referrer-Policy", "no-referrer"))
JSON = "application/json; charset=utf-8"
MAX_PASSWORD = 1024


def _loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address.split("%", 1)[0]).is_loopback
    except ValueError:
        return False


def _host_name(host: str) -> str:
    """The name or address of a Host header without its port ("192.168.1.20:8767" -> "192.168.1.20",
    "[fe80::1]:8767" -> "[fe80::1]"); "" for a malformed one."""
    match = re.fullmatch(r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)(:\d{1,5})?", host)
    return match.group(1) if match else ""


def _json(status: int, body: Any, *headers: tuple[str, str]) -> HttpReply:
    return HttpReply(status, json.dumps(body, ensure_ascii=False).encode(), JSON, SECURITY + headers)


class ConsoleServer:
    prefix = "/console"

    def __init__(self, password: PasswordFile, sessions: Sessions, throttle: LoginThrottle, routes: Routes,
                 *, tls_available: bool, live: LiveHandler | None = None,
                 background: Sequence[Callable[[], Awaitable[None]]] = ()) -> None:
        self._live = live
        self._background = tuple(background)  # run by `run` (the live conversation log's bus reader)
        self._password = password
        self._sessions = sessions
        self._throttle = throttle
        self._routes = routes
        self._tls_available = tls_available
        self._files = {name: (STATIC / name).read_bytes() for name in [*PUBLIC, *PRIVATE, "index.html", "login.html"]}
        self._hash: tuple[int, str] | None = None  # (mtime_ns, stored hash) of the password file
        self._checks: set[asyncio.Future[bool | None]] = set()  # password checks running (see `_check`)
        self._log_throttle = LogThrottle(log)  # refused logins: a line per address and reason per 10 s

    def _stored(self) -> str:
        """The stored password hash (re-read when the file changed: another process may set it)."""
        try:
            mtime = os.stat(self._password.path).st_mtime_ns
        except FileNotFoundError:
            return ""
        if self._hash is None or self._hash[0] != mtime:
            self._hash = (mtime, self._password.stored())
        return self._hash[1]

    def _static(self, name: str, content_type: str, status: int = 200) -> HttpReply:
        return HttpReply(status, self._files[name], f"{content_type}; charset=utf-8", SECURITY)

    async def http(self, request: HttpRequest) -> HttpReply:
        peer = f"console {request.remote[0]}:{request.remote[1]}"
        rest = request.path[len(self.prefix):].lstrip("/")
        if request.method == "GET" and rest in PUBLIC:
            return self._static(rest, PUBLIC[rest])
        if rest == "api/login":
            return await self._login(request, peer)
        session = self._sessions.get(cookie_token(request.headers.get("Cookie")), self._stored())
        if session is None:
            if rest.startswith("api/"):
                return _json(401, {"error": "login-needed", "message": "log in first (POST /console/api/login)"})
            return self._static("login.html", "text/html", 401)
        if request.method != "GET" and (refused := self._write_refusal(request, session)):
            log.warning("%s: %s /console/%s refused: %s", peer, request.method, log_safe(rest), refused)
            return _json(403, {"error": "forbidden", "message": refused})
        if request.method == "GET" and rest in ("", "index.html"):
            return self._static("index.html", "text/html")
        if request.method == "GET" and rest in PRIVATE:
            return self._static(rest, PRIVATE[rest])
        if rest == "api/session" and request.method == "GET":
            return _json(200, {"csrf": session.csrf, "expires_at": session.expires_at})
        if rest == "api/logout" and request.method == "POST":
            await self._sessions.drop(session.token)
            log.info("%s: logged out", peer)
            return _json(200, {"ok": True}, ("Set-Cookie", cookie_header(None, request.secure, 0)))
        if rest.startswith("api/"):
            return await self._api(request, rest[4:], peer)
        return _json(404, {"error": "not-found", "message": f"nothing at {request.path}"})

    def api_routes(self) -> list[tuple[str, str]]:
        """Every (method, path below /console/api/) the API answers (for the security tests)."""
        return sorted(self._routes)

    async def run(self) -> None:
        """The console's background work (Gateway.serve runs it once, whatever serves the pages)."""
        try:
            async with asyncio.TaskGroup() as tg:
                for work in self._background:
                    tg.create_task(work())
        finally:  # the gateway stops: password checks still running end with it
            for check in list(self._checks):
                check.cancel()
            await asyncio.gather(*self._checks, return_exceptions=True)

    async def upgrade(self, request: HttpRequest) -> HttpReply | None:
        """The live WebSocket: accepted (None) with a session from the console's own origin."""
        peer = f"console {request.remote[0]}:{request.remote[1]}"
        rest = request.path[len(self.prefix):].lstrip("/")
        if self._sessions.get(cookie_token(request.headers.get("Cookie")), self._stored()) is None:
            log.warning("%s: WebSocket /console/%s refused: no session", peer, log_safe(rest))
            return _json(401, {"error": "login-needed", "message": "log in first (POST /console/api/login)"})
        if rest != LIVE or self._live is None:
            return _json(404, {"error": "not-found", "message": f"no WebSocket at {request.path}"})
        origin = request.headers.get("Origin")
        expected = f"{'https' if request.secure else 'http'}://{request.headers.get('Host', '')}"
        if self._tls_available and not request.secure and not _loopback(request.remote[0]):
            refused = "plain http from another machine: use the https address"
        elif origin != expected:
            refused = f"cross-site WebSocket from {origin!r} (expected {expected!r})"
        else:
            return None
        log.warning("%s: WebSocket /console/%s refused: %s", peer, log_safe(rest), refused)
        return _json(403, {"error": "forbidden", "message": refused})

    async def socket(self, sock: TextSocket) -> None:
        peer = f"console {sock.remote[0]}:{sock.remote[1]}"
        token = cookie_token(sock.headers.get("Cookie"))

        def alive() -> bool:
            return self._sessions.get(token, self._stored()) is not None

        if self._live is None or not alive():  # (`upgrade` let it in a moment ago)
            await sock.close(SESSION_ENDED, "log in first")
            return
        log.info("%s: live updates", peer)
        await self._live(sock, alive, peer)

    def _origin_refusal(self, request: HttpRequest) -> str | None:
        origin = request.headers.get("Origin")
        expected = f"{'https' if request.secure else 'http'}://{request.headers.get('Host', '')}"
        if self._tls_available and not request.secure and not _loopback(request.remote[0]):
            return "plain http from another machine: use the https address"
        if origin is None:
            return "no Origin header (writes must come from the console page)"
        if origin != expected:
            return f"cross-site request from {origin!r} (expected {expected!r})"
        if not request.headers.get("Content-Type", "").startswith("application/json"):
            return "writes must be JSON (Content-Type: application/json)"
        return None

    def _write_refusal(self, request: HttpRequest, session: Session) -> str | None:
        if refused := self._origin_refusal(request):
            return refused
        if not session.csrf_ok(request.headers.get("X-CSRF-Token")):
            return "missing or wrong X-CSRF-Token"
        return None

    async def _login(self, request: HttpRequest, peer: str) -> HttpReply:
        address = request.remote[0]
        if request.method != "POST":
            return _json(405, {"error": "method", "message": "POST the password as JSON"})
        if refused := self._origin_refusal(request):
            log.warning("%s: login refused: %s", peer, refused)
            return _json(403, {"error": "forbidden", "message": refused})
        try:
            password = json.loads(request.body).get("password")
        except (ValueError, AttributeError):
            password = None
        if not isinstance(password, str) or not password or len(password) > MAX_PASSWORD:
            return _json(400, {"error": "bad-request", "message": 'send {"password": "..."}'})
        stored = self._stored()
        if not stored:
            return _json(503, {"error": "no-password", "message": "no console password is set: run `gateway console password`"})
        if (refusal := self._throttle.begin(address)) is not None:  # reserved before the check runs
            wait = math.ceil(refusal.wait_s)
            self._log_throttle.warning(("login", address, refusal.status), "%s: login refused (%d): %s, %d s to wait",
                                       peer, refusal.status, refusal.why, wait)
            return _json(refusal.status, {"error": "throttled" if refusal.status == 429 else "busy",
                                          "message": f"{refusal.why}; try again in {wait} s"}, ("Retry-After", str(wait)))
        check = asyncio.ensure_future(self._check(password, address, peer))
        self._checks.add(check)  # runs on if the request goes away: it holds its place until done
        check.add_done_callback(self._checks.discard)
        ok = await asyncio.shield(check)
        if ok is None:
            return _json(503, {"error": "no-password", "message": "the console password file is broken; set it again "
                                                                  "with `gateway console password`"})
        if not ok:
            return _json(401, {"error": "wrong-password", "message": "wrong password"})
        self._throttle.succeeded(address)
        session = await self._sessions.create(stored)
        log.info("%s: logged in", peer)
        return _json(200, {"csrf": session.csrf, "expires_at": session.expires_at},
                     ("Set-Cookie", cookie_header(session, request.secure, self._sessions.ttl_s)))

    async def _check(self, password: str, address: str, peer: str) -> bool | None:
        """One password check reserved with the throttle (scrypt: ~50 ms of CPU, off the loop): its
        place given back and a wrong password counted in the same step, also when the request that
        asked for it went away meanwhile. None: the password file is broken."""
        try:
            ok = await asyncio.to_thread(self._password.verify, password)
        except PasswordError as exc:
            log.error("console: %s", exc)
            return None
        finally:
            self._throttle.end(address)
        if not ok:
            wait = self._throttle.failed(address)
            log.warning("%s: login failed: wrong password%s", peer, f" (locked out for {wait:.0f} s)" if wait else "")
        return ok

    async def _api(self, request: HttpRequest, path: str, peer: str) -> HttpReply:
        handler = self._routes.get((request.method, path))
        if handler is None:
            known = sorted({p for _, p in self._routes})
            return _json(404, {"error": "not-found", "message": f"no API {request.method} {path}; known: {', '.join(known)}"})
        body = None
        if request.method != "GET":
            try:
                body = json.loads(request.body or b"null")
            except ValueError as exc:
                return _json(400, {"error": "bad-request", "message": f"the body is not JSON: {exc}"})
        query = {k: v[-1] for k, v in parse_qs(request.query).items()}
        try:
            answer = await handler(ApiRequest(request.method, path, query, body, peer, _host_name(request.headers.get('Host', ''))))
        except ApiError as exc:
            log.warning("%s: %s /console/api/%s refused: %s", peer, request.method, path, exc.message)
            return _json(exc.status, {"error": "bad-request" if exc.status == 400 else "refused",
                                      "message": exc.message, "field": exc.field, "line": exc.line,
                                      **({"problems": exc.problems} if exc.problems else {})})
        except Exception as exc:  # boundary: one failing request must not take the console down
            log.exception("%s: %s /console/api/%s failed", peer, request.method, path)
            return _json(500, {"error": "internal", "message": f"{type(exc).__name__}: {exc}"})
        if isinstance(answer, JsonAnswer):
            return HttpReply(200, answer.body, JSON, SECURITY)
        if isinstance(answer, FileAnswer):
            disposition = ("Content-Disposition", f'{"inline" if answer.inline else "attachment"}; filename="{answer.filename}"')
            return HttpReply(200, answer.body, answer.content_type, SECURITY + (disposition,))
        return _json(200, answer)
