"""A small HTTP(S) + WebSocket server for LAN screens and browser voice boxes.

Plain HTTP GETs are answered by `routes(path, query, peer)` (status, content type, body); a WebSocket
upgrade on `ws_path` is handed to `on_socket` as a `TextSocket` (JSON text frames), one on
`device_path` to the device handler as a `WebSocketConnection` (binary wire protocol, like the
device link), so a page served here reaches the gateway on its own origin (also over TLS, which
browsers require for the microphone on a LAN address). Everything else is 404. Used by
`gateway.screens`.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Awaitable, Callable
from http import HTTPStatus
from urllib.parse import parse_qs, urlsplit

from websockets.asyncio.server import Request, Response, ServerConnection, serve
from websockets.datastructures import Headers
from websockets.exceptions import ConnectionClosed

from gateway.links.base import ConnectionHandler, LinkClosed
from gateway.links.websocket import WebSocketConnection

log = logging.getLogger(__name__)

Routes = Callable[[str, dict[str, str], str], tuple[int, str, bytes] | None]


class TextSocket:
    """One screen's WebSocket: text frames in and out; `LinkClosed` when it goes away."""

    def __init__(self, ws: ServerConnection, query: dict[str, str]) -> None:
        host, port = ws.remote_address[:2]
        self.peer = f"screen {host}:{port}"
        self.query = query
        self.host = ws.request.headers.get("Host", "") if ws.request else ""  # as the screen reached us
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
                 max_frame_bytes: int = 65536, tls: ssl.SSLContext | None = None) -> None:
        self.host = host
        self.port = port  # the bound port once serving (useful with port 0)
        self.ws_path = ws_path
        self.device_path = device_path
        self._routes = routes
        self._on_socket = on_socket
        self._max = max_frame_bytes
        self._tls = tls

    def _http(self, conn: ServerConnection, request: Request) -> Response | None:
        path, query = _query(request.path)
        if path in (self.ws_path, self.device_path) and request.headers.get("Upgrade", "").lower() == "websocket":
            return None  # go on with the WebSocket handshake
        answer = self._routes(path, query, "%s:%s" % tuple(conn.remote_address[:2]))
        if answer is None:
            return conn.respond(HTTPStatus.NOT_FOUND, "not found\n")
        status, content_type, body = answer
        headers = Headers([("Content-Type", content_type), ("Content-Length", str(len(body))),
                           ("Cache-Control", "no-store"), ("Access-Control-Allow-Origin", "*")])
        return Response(status, HTTPStatus(status).phrase, headers, body)

    async def serve(self, devices: ConnectionHandler | None, ready: asyncio.Event | None = None) -> None:
        async def on_connect(ws: ServerConnection) -> None:
            path, query = _query(ws.request.path if ws.request else "")
            if path == self.device_path and devices is not None:
                await devices(WebSocketConnection(ws, self._max))
            elif path == self.ws_path:
                await self._on_socket(TextSocket(ws, query))

        async with serve(on_connect, self.host, self.port, process_request=self._http,
                         compression=None, max_size=4 * self._max, ssl=self._tls) as server:
            self.port = server.sockets[0].getsockname()[1]
            if ready is not None:
                ready.set()
            await asyncio.Future()  # run until cancelled
