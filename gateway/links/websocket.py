"""WebSocket device link: one wire-contract message per binary WebSocket frame.

Other device protocols can share the port as *endpoints* (the xiaozhi boxes, gateway/links/xiaozhi/):
each owns a WebSocket path and plain HTTP paths (GET via websockets' `process_request`, other
methods via gateway/links/http_front.py); `/ws` (server.websocket_path) stays the gateway's own.
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

from firmware_protocol import Message, ProtocolError, decode, encode
from gateway.links.base import ConnectionHandler, LinkClosed, LinkServices
from gateway.links.base import DeviceConnection
from gateway.links.http_front import HttpFrontConnection, HttpReply, HttpRequest

log = logging.getLogger(__name__)


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


class WebSocketConnection:
    def __init__(self, ws: ServerConnection, max_frame_bytes: int) -> None:
        host, port = ws.remote_address[:2]
        self.peer = f"ws {host}:{port}"
        self._ws = ws
        self._max = max_frame_bytes

    async def receive(self) -> Message | ProtocolError:
        try:
            data = await self._ws.recv()
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


class WebSocketLink:
    name = "websocket"

    def __init__(self, host: str, port: int, path: str = "/ws", max_frame_bytes: int = 65536,
                 endpoints: Sequence[WebSocketEndpoint] = ()) -> None:
        self.host = host
        self.port = port  # replaced by the bound port once serving (useful with port 0)
        self.path = path
        self.max_frame_bytes = max_frame_bytes
        self.endpoints = tuple(endpoints)

    def _endpoint(self, path: str) -> WebSocketEndpoint | None:
        return next((e for e in self.endpoints if e.owns_websocket(path)), None)

    async def _http(self, request: HttpRequest) -> HttpReply:
        for endpoint in self.endpoints:
            if endpoint.owns_http(request.path):
                return await endpoint.http(request)
        log.warning("http %s:%s: %s %s: no such endpoint", *request.remote[:2], request.method, request.path)
        return HttpReply(404, f"nothing at {request.path}; devices connect to {self.path}\n".encode())

    async def _check_path(self, conn: ServerConnection, request: Request) -> Response | None:
        path = request.path.split("?", 1)[0]
        if path == self.path or self._endpoint(path) is not None:
            return None
        if any(e.owns_http(path) for e in self.endpoints):
            reply = await self._http(HttpRequest("GET", path, request.headers, b"", conn.local_address[:2], conn.remote_address[:2]))
            return Response(reply.status, HTTPStatus(reply.status).phrase,
                            Headers({"Content-Type": reply.content_type, "Content-Length": str(len(reply.body))}), reply.body)
        if path != self.path:
            log.warning("ws %s: refused request for %s (devices connect to %s)", conn.remote_address, request.path, self.path)
            return conn.respond(HTTPStatus.NOT_FOUND, f"devices connect to {self.path}\n")
        return None

    async def serve(self, handler: ConnectionHandler, ready: asyncio.Event | None = None,
                    services: LinkServices | None = None) -> None:
        for endpoint in self.endpoints:
            endpoint.attach(services or LinkServices())

        async def on_connect(ws: ServerConnection) -> None:
            endpoint = self._endpoint(ws.request.path.split("?", 1)[0]) if ws.request is not None else None
            await handler(endpoint.connection(ws) if endpoint else WebSocketConnection(ws, self.max_frame_bytes))

        # Frames above 4x the protocol limit are refused by websockets itself (close code 1009),
        # so a hostile peer cannot make us buffer unbounded data; smaller oversize frames get a
        # protocol error and the connection stays up.
        async with serve(
            on_connect,
            self.host,
            self.port,
            max_size=4 * self.max_frame_bytes,
            process_request=self._check_path,
            compression=None,
            create_connection=functools.partial(HttpFrontConnection, http_handler=self._http) if self.endpoints else None,
        ) as server:
            self.port = server.sockets[0].getsockname()[1]
            if ready is not None:
                ready.set()
            await asyncio.Future()  # run until cancelled
