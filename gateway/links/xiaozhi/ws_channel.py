"""A xiaozhi box's WebSocket (/xiaozhi/v1/) as a `BoxChannel`: JSON text frames, Opus in binary frames.

The box's headers name it (Device-Id, Client-Id, Authorization: Bearer, User-Agent) and choose the
binary protocol version (Protocol-Version 1, 2 or 3: framing.py). A binary frame of type JSON
(versions 2 and 3) is handed on as text. Errors that end the session close the WebSocket with a
close code and the reason.
"""

from __future__ import annotations

from typing import Any

from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed

from firmware_protocol import ProtocolError
from gateway.links.base import LinkClosed
from gateway.links.xiaozhi import framing
from gateway.links.xiaozhi.identity import bearer_token


class WebSocketChannel:
    def __init__(self, ws: ServerConnection, max_frame_bytes: int) -> None:
        assert ws.request is not None
        headers = ws.request.headers
        host, port = ws.remote_address[:2]
        self.mac = headers.get("Device-Id", "")
        self.client_id = headers.get("Client-Id", "")
        self.peer = f"xiaozhi {host}:{port} (Device-Id {self.mac or 'missing'})"
        self.token = bearer_token(headers.get("Authorization", ""))
        self.user_agent = headers.get("User-Agent", "")
        self._ws = ws
        self._max_frame_bytes = max_frame_bytes
        self._pending: ProtocolError | None = None
        self.version = 1
        try:
            self.version = framing.check_version(headers.get("Protocol-Version"))
        except ProtocolError as exc:
            self._pending = exc
        self._closed = False

    def opening_error(self) -> ProtocolError | None:
        error, self._pending = self._pending, None
        return error

    async def receive(self) -> str | bytes | ProtocolError:
        try:
            data = await self._ws.recv()
        except ConnectionClosed as exc:
            raise LinkClosed(str(exc)) from None
        if len(data) > self._max_frame_bytes:
            return ProtocolError("frame-too-large", f"frame of {len(data)} bytes exceeds the limit of {self._max_frame_bytes}")
        if isinstance(data, str):
            return data
        try:
            frame = framing.decode_binary(data, self.version)
        except ProtocolError as exc:
            return exc
        return frame.payload.decode("utf-8", errors="replace") if frame.kind == framing.TYPE_JSON else frame.payload

    def check_hello(self, msg: dict[str, Any]) -> None:
        if "version" in msg and msg["version"] != self.version:
            raise ProtocolError(framing.UNSUPPORTED_VERSION,
                                f"hello says version {msg['version']!r}, the Protocol-Version header {self.version}")

    def hello_reply(self, reply: dict[str, Any]) -> dict[str, Any]:
        return reply

    async def send_json(self, msg: dict[str, Any]) -> None:
        try:
            await self._ws.send(framing.dump(msg))
        except ConnectionClosed as exc:
            raise LinkClosed(str(exc)) from None

    async def send_audio(self, packet: bytes, timestamp_ms: int) -> None:
        try:
            await self._ws.send(framing.encode_audio(packet, self.version, timestamp_ms))
        except ConnectionClosed as exc:
            raise LinkClosed(str(exc)) from None

    async def close(self, code: int, reason: str, goodbye: bool = True) -> None:
        if not self._closed:
            self._closed = True
            await self._ws.close(code, reason.encode()[:120].decode(errors="ignore"))
