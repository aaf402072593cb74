"""A small HTTP + WebSocket server for LAN screens (the only websockets import outside the device link).

Plain HTTP GETs are answered by `routes(path, query)` (status, content type, body); a WebSocket
upgrade on `ws_path` is handed to `on_socket` as a `TextSocket` (JSON text frames). Everything
else is 404. Used by `gateway.screens`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from http import HTTPStatus
from urllib.parse import parse_qs, urlsplit

from websockets.asyncio.server import Request, Response, ServerConnection, serve
from websockets.datastructures import Headers
from websockets.exceptions import ConnectionClosed

from gateway.links.base import LinkClosed

log = logging.getLogger(__name__)

Routes = Callable[[str, dict[str, str]], tuple[int, str, bytes] | None]


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


def _query(path: str) -> tuple[str, dict[str, str]]:
    parts = urlsplit(path)
    return parts.path, {k: v[-1] for k, v in parse_qs(parts.query).items()}


class WebServer:
    def __init__(self, host: str, port: int, ws_path: str, routes: Routes,
                 on_socket: Callable[[TextSocket], Awaitable[None]]) -> None:
        self.host = host
        self.port = port  # the bound port once serving (useful with port 0)
        self.ws_path = ws_path
        self._routes = routes
        self._on_socket = on_socket

    def _http(self, conn: ServerConnection, request: Request) -> Response | None:
        path, query = _query(request.path)
        if path == self.ws_path and request.headers.get("Upgrade", "").lower() == "websocket":
            return None  # go on with the WebSocket handshake
        answer = self._routes(path, query)
        if answer is None:
            return conn.respond(HTTPStatus.NOT_FOUND, "not found\n")
        status, content_type, body = answer
        headers = Headers([("Content-Type", content_type), ("Content-Length", str(len(body))),
                           ("Cache-Control", "no-store"), ("Access-Control-Allow-Origin", "*")])
        return Response(status, HTTPStatus(status).phrase, headers, body)

    async def serve(self, ready: asyncio.Event | None = None) -> None:
        async def on_connect(ws: ServerConnection) -> None:
            _, query = _query(ws.request.path if ws.request else "")
            await self._on_socket(TextSocket(ws, query))

        async with serve(on_connect, self.host, self.port, process_request=self._http,
                         compression=None, max_size=65536) as server:
            self.port = server.sockets[0].getsockname()[1]
            if ready is not None:
                ready.set()
            await asyncio.Future()  # run until cancelled
