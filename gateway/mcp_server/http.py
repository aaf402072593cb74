"""Serving the MCP server over streamable HTTP (`/mcp`) and SSE (`/sse`) from the running
gateway, behind a bearer token (constant-time compare, the scheme `Bearer` case-insensitive as
RFC 7235 says). Unauthorised requests get 401 and a log line naming the peer.

The SDK's DNS-rebinding protection is off: it would accept only localhost Host headers (421 for
every LAN client of `mcp.host: 0.0.0.0`), and it protects endpoints a browser can reach with
what it sends by itself (cookies, no credentials). This one needs the bearer token on every
request, which a page in a browser never has nor adds to a cross-origin request, so a rebound
page still gets 401."""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
import socket
from typing import Any

import uvicorn
from mcp.server.fastmcp import FastMCP
from mcp.server.transport_security import TransportSecuritySettings

log = logging.getLogger(__name__)
SHUTDOWN_GRACE_S = 2.0


class BearerAuth:
    """ASGI middleware: HTTP requests must carry `Authorization: Bearer <token>`."""

    def __init__(self, app: Any, token: str) -> None:
        if not token:
            raise ValueError("MCP over HTTP needs a bearer token (mcp.token)")
        self.app = app
        self._expected = token.encode()

    def _authorised(self, header: bytes) -> bool:
        scheme, _, credentials = header.strip().partition(b" ")
        return scheme.lower() == b"bearer" and hmac.compare_digest(credentials.strip(), self._expected)

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            got = dict(scope.get("headers") or []).get(b"authorization", b"")
            if not self._authorised(got):
                peer = "%s:%s" % tuple(scope.get("client") or ("?", "?"))
                log.warning("mcp http %s: auth-failed: missing or wrong bearer token for %s", peer, scope.get("path"))
                body = json.dumps({"error": "auth-failed", "text": "send Authorization: Bearer <mcp.token>"}).encode()
                await send({"type": "http.response.start", "status": 401,
                            "headers": [(b"content-type", b"application/json"), (b"www-authenticate", b"Bearer")]})
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


def http_app(server: FastMCP, token: str) -> Any:
    # The bearer token guards every request; see the module docstring for why the SDK's
    # Host allow-list is off (it is read when the apps are built, just below).
    server.settings.transport_security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    app = server.streamable_http_app()  # its lifespan runs the session manager
    app.router.routes.extend(server.sse_app().routes)
    return BearerAuth(app, token)


async def serve_http(server: FastMCP, host: str, port: int, token: str,
                     ready: asyncio.Event | None = None) -> None:
    """Serve until cancelled. The socket is bound (and listening) before `ready` is set, so
    `server.settings.port` is then the real port (useful with port 0)."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    server.settings.port = sock.getsockname()[1]
    # Bounded graceful shutdown: a client's open GET stream would otherwise hold the gateway's exit forever.
    config = uvicorn.Config(http_app(server, token), log_level="warning", lifespan="on",
                            timeout_graceful_shutdown=SHUTDOWN_GRACE_S)
    userver = _Server(config)
    log.info("MCP over HTTP on http://%s:%d/mcp (and /sse)", host, server.settings.port)
    if ready is not None:
        ready.set()
    serving = asyncio.create_task(userver.serve(sockets=[sock]))
    try:
        await asyncio.shield(serving)
    except asyncio.CancelledError:
        userver.should_exit = True  # graceful: close sessions, run the lifespan shutdown
        await serving
        raise
    finally:
        sock.close()


class _Server(uvicorn.Server):
    """uvicorn without its signal capture: the gateway owns SIGINT/SIGTERM."""

    def capture_signals(self) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()
