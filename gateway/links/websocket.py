"""WebSocket device link: one wire-contract message per binary WebSocket frame."""

from __future__ import annotations

import asyncio
import logging
from http import HTTPStatus

from websockets.asyncio.server import Request, Response, ServerConnection, serve
from websockets.exceptions import ConnectionClosed

from firmware_protocol import Message, ProtocolError, decode, encode
from gateway.links.base import ConnectionHandler, LinkClosed

log = logging.getLogger(__name__)


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

    def __init__(self, host: str, port: int, path: str = "/ws", max_frame_bytes: int = 65536) -> None:
        self.host = host
        self.port = port  # replaced by the bound port once serving (useful with port 0)
        self.path = path
        self.max_frame_bytes = max_frame_bytes

    def _check_path(self, conn: ServerConnection, request: Request) -> Response | None:
        if request.path.split("?", 1)[0] != self.path:
            log.warning("ws %s: refused request for %s (devices connect to %s)", conn.remote_address, request.path, self.path)
            return conn.respond(HTTPStatus.NOT_FOUND, f"devices connect to {self.path}\n")
        return None

    async def serve(self, handler: ConnectionHandler, ready: asyncio.Event | None = None) -> None:
        async def on_connect(ws: ServerConnection) -> None:
            await handler(WebSocketConnection(ws, self.max_frame_bytes))

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
        ) as server:
            self.port = server.sockets[0].getsockname()[1]
            if ready is not None:
                ready.set()
            await asyncio.Future()  # run until cancelled
