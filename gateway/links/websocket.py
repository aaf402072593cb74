"""WebSocket device link: one wire-contract message per binary WebSocket frame.

Other device protocols can share the port as *endpoints* (the xiaozhi boxes, gateway/links/xiaozhi/):
each owns a WebSocket path and plain HTTP paths (GET via websockets' `process_request`, other
methods via gateway/links/http_front.py); `/ws` (server.websocket_path) stays the gateway's own.

With `limits` (gateway/links/limits.py, what `gateway run` serves) every connection takes a
session slot of its peer address or is refused `too-many-sessions`, and its logins and readings
are limited per address. With `idle_s`, a connection whose device sent nothing for that long gets
a Ping; if nothing comes back within `idle_probe_s` it is closed (`idle-timeout`). The screen
server's /device path (gateway/links/web.py) is served the same way: `serve_within_limits`.
A request that gives a field twice that must be given once (two Host) is answered 400 before the
handshake (gateway/links/http_front.py `refuse_repeated_field`).

In cluster mode a connection whose device another gateway took over (the box reconnected there:
gateway/devices/session_lease.py) is closed with code 4409 `lease-lost` and nothing else.
"""

from __future__ import annotations

import asyncio
import logging
import functools
from collections.abc import Sequence
from http import HTTPStatus
from typing import Protocol

from websockets.asyncio.server import Request, Response, ServerConnection, serve
from websockets.datastructures import Headers
from websockets.exceptions import ConnectionClosed

from firmware_protocol import Error, Message, Ping, ProtocolError, decode, encode
from gateway.links.base import ConnectionHandler, LinkClosed, LinkServices, Roaming
from gateway.links.base import DeviceConnection
from gateway.links.http_front import HttpFrontConnection, HttpReply, HttpRequest, refuse_repeated_field
from gateway.links.http_log import server_logger
from gateway.links.limits import GuardedConnection, LogThrottle, PeerLimits
from gateway.log_safe import log_safe

log = logging.getLogger(__name__)

# Received frames a connection buffers before TCP flow control holds its device back: with frames
# of up to 4x max_frame_bytes, at most 2 MiB per connection at the default limit.
MAX_QUEUED_FRAMES = 8
LEASE_LOST_CLOSE = 4409  # close code: another gateway of the cluster serves the device now


class WebSocketEndpoint(Protocol):
    """Another protocol on the same port: a WebSocket path and plain HTTP paths it answers."""

    name: str

    def owns_websocket(self, path: str) -> bool: ...

    def owns_http(self, path: str) -> bool: ...

    async def http(self, request: HttpRequest) -> HttpReply: ...

    def connection(self, ws: ServerConnection) -> DeviceConnection: ...

    def attach(self, services: LinkServices) -> None:
        """Called once when the link starts serving, with what the gateway offers its links."""
        ...


class WebSocketConnection(Roaming):
    def __init__(self, ws: ServerConnection, max_frame_bytes: int, idle_s: float | None = None,
                 idle_probe_s: float = 10.0) -> None:
        host, port = ws.remote_address[:2]
        self.peer = f"ws {host}:{port}"
        self._ws = ws
        self._max = max_frame_bytes
        self._idle_s, self._probe_s = idle_s, idle_probe_s

    async def _recv(self) -> str | bytes:
        """The next frame; with idle_s, a Ping after idle_s of silence, LinkClosed if that stays unanswered."""
        if self._idle_s is None:
            return await self._ws.recv()
        try:
            async with asyncio.timeout(self._idle_s):
                return await self._ws.recv()  # cancelling recv() loses no data (websockets >= 13)
        except TimeoutError:
            pass
        await self.send(Ping(nonce=0))
        try:
            async with asyncio.timeout(self._probe_s):
                return await self._ws.recv()
        except TimeoutError:
            text = f"no message for {self._idle_s:g} s and no answer to a Ping within {self._probe_s:g} s"
            log.warning("%s: idle-timeout: %s (server.session_idle_s); closing", self.peer, text)
            await self.send(Error(code="idle-timeout", text=text))
            raise LinkClosed(f"idle-timeout: {text}") from None

    async def receive(self) -> Message | ProtocolError:
        try:
            data = await self._recv()
        except ConnectionClosed as exc:
            raise LinkClosed(str(exc)) from None
        if isinstance(data, str):
            return ProtocolError("malformed-message", "text frames are not part of the protocol; send binary frames")
        if len(data) > self._max:
            return ProtocolError("frame-too-large", f"frame of {len(data)} bytes exceeds the limit of {self._max}")
        try:
            return decode(data)
        except ProtocolError as exc:
            return exc

    async def send(self, message: Message) -> None:
        try:
            await self._ws.send(encode(message))
        except ConnectionClosed as exc:
            raise LinkClosed(str(exc)) from None

    async def close(self, reason: str = "") -> None:
        await self._ws.close(reason=reason[:120])

    async def lease_lost(self, text: str) -> None:
        """Close code 4409 `lease-lost: <text>`, no frame before it (the device is served elsewhere)."""
        try:
            await self._ws.close(LEASE_LOST_CLOSE, f"lease-lost: {text}"[:120])
        except ConnectionClosed:
            pass


async def serve_within_limits(handler: ConnectionHandler, ws: ServerConnection, conn: DeviceConnection,
                              limits: PeerLimits | None, throttle: LogThrottle, own_protocol: bool = True) -> None:
    """Serve `conn` (a device on `ws`) with `handler` in a session slot of its peer address, its
    logins and readings limited per address (GuardedConnection); no slot: refused `too-many-sessions`
    (the Error frame only if the device speaks this protocol, `own_protocol`), then close code 1013.
    Without `limits`, served as it is. The device link's paths and the screen server's /device."""
    if limits is None:
        await handler(conn)
        return
    address = str(ws.remote_address[0])
    if (refusal := limits.admit(address)) is not None:
        throttle.warning(("sessions", address), "%s: too-many-sessions: refused: %s", conn.peer, refusal)
        try:
            if own_protocol:  # the endpoints' devices (xiaozhi) get just the close code
                await ws.send(encode(Error(code="too-many-sessions", text=refusal)))
            await ws.close(1013, "too-many-sessions")  # 1013: try again later
        except ConnectionClosed:
            pass
        return
    try:
        await handler(GuardedConnection(conn, address, limits, throttle))
    finally:
        limits.release(address)


class WebSocketLink:
    name = "websocket"

    def __init__(self, host: str, port: int, path: str = "/ws", max_frame_bytes: int = 65536,
                 endpoints: Sequence[WebSocketEndpoint] = (), limits: PeerLimits | None = None,
                 idle_s: float | None = None, idle_probe_s: float = 10.0) -> None:
        self.host = host
        self.port = port  # replaced by the bound port once serving (useful with port 0)
        self.path = path
        self.max_frame_bytes = max_frame_bytes
        self.endpoints = tuple(endpoints)
        self.limits = limits  # None: no session caps, login or per-address reading limits
        self.idle_s, self.idle_probe_s = idle_s, idle_probe_s  # idle_s None: idle connections stay
        self._throttle = LogThrottle(log)

    def _endpoint(self, path: str) -> WebSocketEndpoint | None:
        return next((e for e in self.endpoints if e.owns_websocket(path)), None)

    async def _http(self, request: HttpRequest) -> HttpReply:
        for endpoint in self.endpoints:
            if endpoint.owns_http(request.path):
                return await endpoint.http(request)
        log.warning("http %s:%s: %s %s: no such endpoint", *request.remote[:2], request.method, log_safe(request.path))
        return HttpReply(404, f"nothing at {request.path}; devices connect to {self.path}\n".encode())

    async def _check_path(self, conn: ServerConnection, request: Request) -> Response | None:
        path = request.path.split("?", 1)[0]
        if (refused := refuse_repeated_field(conn, request)) is not None:
            return refused
        if path == self.path or self._endpoint(path) is not None:
            return None
        if any(e.owns_http(path) for e in self.endpoints):
            reply = await self._http(HttpRequest("GET", path, request.headers, b"", conn.local_address[:2], conn.remote_address[:2]))
            return Response(reply.status, HTTPStatus(reply.status).phrase,
                            Headers({"Content-Type": reply.content_type, "Content-Length": str(len(reply.body))}), reply.body)
        if path != self.path:
            log.warning("ws %s: refused request for %s (devices connect to %s)", conn.remote_address,
                        log_safe(request.path), self.path)
            return conn.respond(HTTPStatus.NOT_FOUND, f"devices connect to {self.path}\n")
        return None

    async def serve(self, handler: ConnectionHandler, ready: asyncio.Event | None = None,
                    services: LinkServices | None = None) -> None:
        for endpoint in self.endpoints:
            endpoint.attach(services or LinkServices())

        async def on_connect(ws: ServerConnection) -> None:
            endpoint = self._endpoint(ws.request.path.split("?", 1)[0]) if ws.request is not None else None
            conn = endpoint.connection(ws) if endpoint else WebSocketConnection(ws, self.max_frame_bytes,
                                                                                 self.idle_s, self.idle_probe_s)
            await serve_within_limits(handler, ws, conn, self.limits, self._throttle, own_protocol=endpoint is None)

        # Frames above 4x the protocol limit are refused by websockets itself (close code 1009),
        # so a hostile peer cannot make us buffer unbounded data; smaller oversize frames get a
        # protocol error and the connection stays up.
        async with serve(
            on_connect,
            self.host,
            self.port,
            max_size=4 * self.max_frame_bytes,
            max_queue=MAX_QUEUED_FRAMES,
            process_request=self._check_path,
            compression=None,
            create_connection=functools.partial(HttpFrontConnection, http_handler=self._http) if self.endpoints else None,
            logger=server_logger(),  # not a line for every page or API answer (gateway/links/http_log.py)
        ) as server:
            self.port = server.sockets[0].getsockname()[1]
            if ready is not None:
                ready.set()
            await asyncio.Future()  # run until cancelled
