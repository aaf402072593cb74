"""The box's side of the xiaozhi protocol (78/xiaozhi-esp32: main/ota.cc, main/protocols/
websocket_protocol.cc), for clients that stand in for a box: the test emulator
(tests/links/xiaozhi/box.py) and `gateway bench --xiaozhi` (gateway/cli/xiaozhi_box.py).

* OTA: a minimal HTTP/1.1 POST (the firmware's esp_http_client does no more) of the system info
  JSON with Device-Id / Client-Id / User-Agent / Activation-Version;
* the WebSocket's headers (Authorization with `Bearer ` added, Protocol-Version, Device-Id,
  Client-Id) and the box's hello (16 kHz mono Opus, 60 ms frames);
* `BoxSocket`: the box's WebSocket (JSON text frames, framed binary audio per protocol version).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from gateway.links.base import LinkClosed
from gateway.links.xiaozhi import framing

MIC_RATE = 16000
MIC_FRAME_MS = 60


async def http_post(url: str, body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
    """POST `body` to `url`: (status, payload)."""
    rest = url.split("://", 1)[1]
    hostport, _, path = rest.partition("/")
    host, _, port = hostport.partition(":")
    reader, writer = await asyncio.open_connection(host, int(port or 80))
    head = "".join(f"{k}: {v}\r\n" for k, v in {**headers, "Host": hostport, "Content-Length": str(len(body))}.items())
    writer.write(f"POST /{path} HTTP/1.1\r\n{head}\r\n".encode() + body)
    await writer.drain()
    data = await asyncio.wait_for(reader.read(), 10)
    writer.close()
    status_line, _, rest_bytes = data.partition(b"\r\n")
    _, _, payload = rest_bytes.partition(b"\r\n\r\n")
    return int(status_line.split()[1]), payload


def system_info(mac: str, client_id: str, firmware: str) -> dict[str, Any]:
    """The JSON body of the box's OTA request."""
    return {"version": 2, "language": "en-US", "flash_size": 16777216, "minimum_free_heap_size": "123456",
            "mac_address": mac, "uuid": client_id, "chip_model_name": "esp32s3",
            "application": {"name": "xiaozhi", "version": firmware, "compile_time": "2026-01-01T00:00:00Z"},
            "board": {"type": "bread-compact-wifi", "name": "bread-compact-wifi"}}


def ota_headers(mac: str, client_id: str, firmware: str) -> dict[str, str]:
    return {"Activation-Version": "1", "Device-Id": mac, "Client-Id": client_id,
            "User-Agent": f"bread-compact-wifi/{firmware}", "Accept-Language": "en-US",
            "Content-Type": "application/json"}


def ws_headers(mac: str, client_id: str, version: int, token: str) -> dict[str, str]:
    headers = {"Protocol-Version": str(version), "Device-Id": mac, "Client-Id": client_id}
    if token:
        headers["Authorization"] = token if " " in token else f"Bearer {token}"
    return headers


def hello(version: int, mcp: bool = True) -> dict[str, Any]:
    return {"type": "hello", "version": version, "features": {"mcp": mcp}, "transport": "websocket",
            "audio_params": {"format": "opus", "sample_rate": MIC_RATE, "channels": 1, "frame_duration": MIC_FRAME_MS}}


class BoxSocket:
    """The box's WebSocket: `send_json`, `send_audio` (framed for the protocol version) and
    `async for` over what the gateway sends (dicts for JSON, bytes for an Opus packet)."""

    def __init__(self, ws: ClientConnection, version: int) -> None:
        self._ws = ws
        self.version = version

    @classmethod
    async def open(cls, url: str, headers: dict[str, str], version: int) -> "BoxSocket":
        return cls(await connect(url, additional_headers=headers, compression=None), version)

    async def send_json(self, msg: dict[str, Any]) -> None:
        try:
            await self._ws.send(json.dumps(msg))
        except ConnectionClosed as exc:
            raise LinkClosed(str(exc)) from None

    async def send_audio(self, packet: bytes, timestamp_ms: int = 0) -> None:
        try:
            await self._ws.send(framing.encode_audio(packet, self.version, timestamp_ms))
        except ConnectionClosed as exc:
            raise LinkClosed(str(exc)) from None

    async def __aiter__(self) -> AsyncIterator[dict[str, Any] | bytes]:
        try:
            async for data in self._ws:
                if isinstance(data, str):
                    yield json.loads(data)
                    continue
                frame = framing.decode_binary(data, self.version)
                yield json.loads(frame.payload) if frame.kind == framing.TYPE_JSON else frame.payload
        except ConnectionClosed:
            return

    async def close(self) -> None:
        await self._ws.close()
