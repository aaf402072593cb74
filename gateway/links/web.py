"""A small HTTP(S) + WebSocket server for LAN screens and browser voice boxes.

Plain HTTP GETs are answered by `routes(path, query, peer)` (status, content type, body); a WebSocket
upgrade on `ws_path` is handed to `on_socket` as a `TextSocket` (JSON text frames), one on
`device_path` to the device handler as a `WebSocketConnection` (binary wire protocol, like the
device link), so a page served here reaches the gateway on its own origin (also over TLS, which
browsers require for the microphone on a LAN address). Those device connections are served
exactly as the device link's (gateway/links/websocket.py `serve_within_limits`): with `limits`
each takes a session slot of its address in the same `PeerLimits`, its logins and readings are
limited per address, and with `idle_s` a silent one is pinged and closed. A `mount` (the
console) answers every method under its path prefix with the request's headers and body (other
methods than GET through gateway/links/http_front.py), and the WebSocket upgrades under it
(`upgrade` decides from the request's headers, before the handshake; `socket` serves it).
Everything else is 404. A request that gives a field twice that must be given once (two Host, two
Cookie) is answered 400 with one log line. Used by `gateway.screens`.

With `tls` the port speaks https and http (gateway/links/tls_or_plain.py): a browser on another
machine asking for one of the `pages` over plain http is redirected (301) to the same URL on
https, where it may use the microphone; this machine, and the screens' WebSockets and audio
(Fay clients speak plain ws), are served over either.
"""

from __future__ import annotations

import asyncio
import functools
import ipaddress
import logging
import ssl
from collections.abc import Awaitable, Callable
from http import HTTPStatus
from urllib.parse import parse_qs, urlsplit

from websockets.asyncio.server import Request, Response, ServerConnection, serve
from websockets.datastructures import Headers
from websockets.exceptions import ConnectionClosed

from gateway.links.base import ConnectionHandler, LinkClosed
from gateway.links.http_front import HttpFrontConnection, HttpMount, HttpReply, HttpRequest, refuse_repeated_field
from gateway.links.http_log import server_logger
from gateway.links.limits import LogThrottle, PeerLimits
from gateway.links.tls_or_plain import TlsOrPlain, is_secure
from gateway.links.websocket import WebSocketConnection, serve_within_limits
from gateway.log_safe import log_safe

log = logging.getLogger(__name__)

Routes = Callable[[str, dict[str, str], str], tuple[int, str, bytes] | None]


def _owns(mount: HttpMount | None, path: str) -> bool:
    return mount is not None and (path == mount.prefix or path.startswith(mount.prefix + "/"))


class TextSocket:
    """One screen's WebSocket: text frames in and out; `LinkClosed` when it goes away."""

    def __init__(self, ws: ServerConnection, query: dict[str, str]) -> None:
        host, port = ws.remote_address[:2]
        self.remote = (host, port)
        self.peer = f"screen {host}:{port}"
        self.query = query
        self.headers = ws.request.headers if ws.request else Headers()  # of the upgrade request
        self.host = self.headers.get("Host", "")  # as the screen reached us
        self.secure = is_secure(ws)  # over TLS: its audio URLs are https too
        self._ws = ws

    async def send(self, text: str) -> None:
        try:
            await self._ws.send(text)
        except ConnectionClosed as exc:
            raise LinkClosed(str(exc)) from None

    async def receive(self) -> str | bytes:
        try:
            return await self._ws.recv()
        except ConnectionClosed as exc:
            raise LinkClosed(str(exc)) from None

    async def close(self, code: int, reason: str) -> None:
        """Close with a code and a reason the page can show (WebSocket close frame)."""
        await self._ws.close(code, reason)


def _query(path: str) -> tuple[str, dict[str, str]]:
    parts = urlsplit(path)
    return parts.path, {k: v[-1] for k, v in parse_qs(parts.query).items()}


class WebServer:
    def __init__(self, host: str, port: int, ws_path: str, routes: Routes,
                 on_socket: Callable[[TextSocket], Awaitable[None]], device_path: str = "/device",
                 max_frame_bytes: int = 65536, tls: ssl.SSLContext | None = None,
                 pages: frozenset[str] = frozenset(), limits: PeerLimits | None = None,
                 idle_s: float | None = None, idle_probe_s: float = 10.0) -> None:
        self.host = host
        self.port = port  # the bound port once serving (useful with port 0)
        self.ws_path = ws_path
        self.device_path = device_path
        self._routes = routes
        self._on_socket = on_socket
        self._max = max_frame_bytes
        self._tls = tls
        self._pages = pages  # with tls: asked by another machine over plain http, redirected to https
        self._limits = limits  # the device connections' (device_path): None, no session caps or login limits
        self._idle_s, self._idle_probe_s = idle_s, idle_probe_s  # idle_s None: idle devices stay
        self._throttle = LogThrottle(log)

    def _to_https(self, conn: ServerConnection, request: Request, path: str) -> Response | None:
        if self._tls is None or path not in self._pages or is_secure(conn) or _is_loopback(conn.remote_address[0]):
            return None
        return self._redirect(conn, request, path)

    def _redirect(self, conn: ServerConnection, request: Request, path: str) -> Response:
        location = f"https://{request.headers.get('Host', '')}{request.path}"
        log.info("http %s:%s: %s over plain http: redirected to https", *conn.remote_address[:2], log_safe(path))
        return Response(301, "Moved Permanently", Headers([("Location", location), ("Content-Length", "0"),
                                                           ("Cache-Control", "no-store")]), b"")

    async def _http(self, conn: ServerConnection, request: Request, mount: HttpMount | None = None) -> Response | None:
        path, query = _query(request.path)
        if (refused := refuse_repeated_field(conn, request)) is not None:
            return refused
        if path in (self.ws_path, self.device_path) and request.headers.get("Upgrade", "").lower() == "websocket":
            return None  # go on with the WebSocket handshake
        if mount is not None and _owns(mount, path):
            if self._tls is not None and not is_secure(conn) and not _is_loopback(conn.remote_address[0]):
                return self._redirect(conn, request, path)  # the console's password only over https on the LAN
            raw_query = request.path.partition("?")[2]
            asked = HttpRequest("GET", path, request.headers, b"", conn.local_address[:2], conn.remote_address[:2],
                                raw_query, is_secure(conn))
            if request.headers.get("Upgrade", "").lower() == "websocket":
                refused = await mount.upgrade(asked)
                if refused is None:
                    return None  # go on with the WebSocket handshake: `mount.socket` serves it
                reply = refused
            else:
                reply = await mount.http(asked)
            headers = Headers([("Content-Type", reply.content_type), ("Content-Length", str(len(reply.body))),
                               ("Cache-Control", "no-store"), *reply.headers])
            return Response(reply.status, HTTPStatus(reply.status).phrase, headers, reply.body)
        if (redirect := self._to_https(conn, request, path)) is not None:
            return redirect
        answer = self._routes(path, query, "%s:%s" % tuple(conn.remote_address[:2]))
        if answer is None:
            return conn.respond(HTTPStatus.NOT_FOUND, "not found\n")
        status, content_type, body = answer
        headers = Headers([("Content-Type", content_type), ("Content-Length", str(len(body))),
                           ("Cache-Control", "no-store"), ("Access-Control-Allow-Origin", "*")])
        return Response(status, HTTPStatus(status).phrase, headers, body)

    async def _other_method(self, request: HttpRequest, mount: HttpMount | None) -> HttpReply:
        if _owns(mount, request.path):
            assert mount is not None
            return await mount.http(request)
        log.warning("http %s:%s: %s %s refused: only GET here", *request.remote[:2], request.method,
                    log_safe(request.path))
        return HttpReply(405, b"only GET here\n")

    async def serve(self, devices: ConnectionHandler | None, ready: asyncio.Event | None = None,
                    mount: HttpMount | None = None) -> None:
        async def on_connect(ws: ServerConnection) -> None:
            path, query = _query(ws.request.path if ws.request else "")
            if path == self.device_path and devices is not None:
                conn = WebSocketConnection(ws, self._max, self._idle_s, self._idle_probe_s)
                await serve_within_limits(devices, ws, conn, self._limits, self._throttle)
            elif path == self.ws_path:
                await self._on_socket(TextSocket(ws, query))
            elif mount is not None and _owns(mount, path):  # accepted by `mount.upgrade`
                await mount.socket(TextSocket(ws, query))

        other = functools.partial(HttpFrontConnection, http_handler=functools.partial(self._other_method, mount=mount))
        make = other if mount is not None else ServerConnection
        both = TlsOrPlain(self._tls, make) if self._tls is not None else None  # https and http on the port
        try:
            async with serve(on_connect, self.host, self.port, process_request=functools.partial(self._http, mount=mount),
                             compression=None, max_size=4 * self._max,
                             create_connection=both or make,
                             logger=server_logger()) as server:  # no line per page or API answer (http_log.py)
                self.port = server.sockets[0].getsockname()[1]
                if ready is not None:
                    ready.set()
                await asyncio.Future()  # run until cancelled
        finally:
            if both is not None:
                await both.close()


def _is_loopback(host: str) -> bool:
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped  # ::ffff:127.0.0.1 on a dual-stack socket
    return address.is_loopback
