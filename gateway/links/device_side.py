"""Device-side connections for `gateway simulate --transport ws|mqtt|coap|serial`.

Each is used like a websockets client connection, which the simulator was written against:
`await send(bytes)`, `await recv() -> bytes`, `async for frame in conn`, `async with conn`. One
frame is one encoded message, whatever the transport carries underneath.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any, Protocol
from urllib.parse import urlsplit

from firmware_protocol import Error, Message, ProtocolError, decode, encode
from gateway.links.base import LinkClosed

TRANSPORTS = ("ws", "mqtt", "coap", "serial")


class _MessageConn(Protocol):
    async def send(self, message: Message) -> None: ...
    async def receive(self) -> Message | ProtocolError: ...
    async def close(self, reason: str = "") -> None: ...


class FramedDevice:
    """Bytes-in/bytes-out view of a message connection (MQTT device, serial port)."""

    def __init__(self, conn: _MessageConn) -> None:
        self._conn = conn

    async def send(self, data: bytes) -> None:
        await self._conn.send(decode(data))

    async def recv(self) -> bytes:
        msg = await self._conn.receive()
        if isinstance(msg, ProtocolError):
            return encode(Error(code=msg.code, text=f"(received a bad frame) {msg.text}"))
        return encode(msg)

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self._frames()

    async def _frames(self) -> AsyncIterator[bytes]:
        while True:
            try:
                yield await self.recv()
            except LinkClosed:
                return

    async def __aenter__(self) -> "FramedDevice":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self._conn.close("simulation done")


async def open_device(transport: str, url: str, device_id: str, token: str = "") -> Any:
    """Connect like a device; raises OSError / TimeoutError / ConnectionError with a reason."""
    if transport == "ws":
        from websockets.asyncio.client import connect

        return await asyncio.wait_for(connect(url, open_timeout=5, compression=None, max_size=None), 10)
    if transport == "mqtt":
        from gateway.links.mqtt_client import MqttConnectError
        from gateway.links.mqtt_device import MqttDevice

        parts = urlsplit(url if "://" in url else f"mqtt://{url}")
        prefix = parts.path.strip("/") or "gw"
        device = MqttDevice(device_id, token, prefix=prefix)
        try:
            await device.connect(parts.hostname or "127.0.0.1", parts.port or 1883)
        except MqttConnectError as exc:
            raise ConnectionError(str(exc)) from None
        return FramedDevice(device)
    if transport == "coap":
        from gateway.links.coap_device import CoapDevice

        coap_device = CoapDevice(device_id, url if urlsplit(url).path.strip("/") else f"{url.rstrip('/')}/gw")
        await coap_device.connect()
        return FramedDevice(coap_device)
    if transport == "serial":
        import serial

        from gateway.links.serial_link import SerialConnection

        path = url.removeprefix("serial://")
        if not path:
            raise ConnectionError("--url must name the serial port, e.g. /dev/ttyUSB0")
        try:
            port = serial.Serial(path, 921600, timeout=0, write_timeout=0)
        except serial.SerialException as exc:
            raise ConnectionError(str(exc)) from None
        return FramedDevice(SerialConnection(port, path, 65536))
    raise ValueError(f"unknown transport {transport!r} (one of {', '.join(TRANSPORTS)})")
