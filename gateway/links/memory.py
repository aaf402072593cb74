"""In-memory link for tests: a device talks to the core through queues, no sockets.

Frames still go through the real codec (encode on one side, decode on the other), so tests
exercise the same bytes a socket would carry, and can inject raw garbage with `send_raw`.
"""

from __future__ import annotations

import asyncio
import itertools

from firmware_protocol import Message, ProtocolError, decode, encode
from gateway.links.base import ConnectionHandler, LinkClosed, LinkServices

_CLOSED = None


class _Pipe:
    def __init__(self) -> None:
        self.queue: asyncio.Queue[bytes | None] = asyncio.Queue()
        self.closed = False

    async def get(self) -> bytes:
        data = await self.queue.get()
        if data is _CLOSED:
            self.queue.put_nowait(_CLOSED)  # keep reporting closed
            raise LinkClosed("closed")
        return data

    def put(self, data: bytes) -> None:
        if self.closed:
            raise LinkClosed("closed")
        self.queue.put_nowait(data)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.queue.put_nowait(_CLOSED)


class MemoryEndpoint:
    """One side of an in-memory connection (the gateway side or the device side)."""

    def __init__(self, peer: str, inbound: _Pipe, outbound: _Pipe) -> None:
        self.peer = peer
        self._in = inbound
        self._out = outbound

    async def receive(self) -> Message | ProtocolError:
        data = await self._in.get()
        try:
            return decode(data)
        except ProtocolError as exc:
            return exc

    async def send(self, message: Message) -> None:
        self._out.put(encode(message))

    def send_raw(self, data: bytes) -> None:
        self._out.put(data)

    async def close(self, reason: str = "") -> None:
        self._out.close()
        self._in.close()


class MemoryLink:
    name = "memory"

    def __init__(self) -> None:
        self._pending: asyncio.Queue[MemoryEndpoint] = asyncio.Queue()
        self._ids = itertools.count(1)

    def connect(self) -> MemoryEndpoint:
        """Open a connection; returns the device side. The gateway side goes to the handler."""
        up, down = _Pipe(), _Pipe()
        n = next(self._ids)
        self._pending.put_nowait(MemoryEndpoint(f"memory #{n}", up, down))
        return MemoryEndpoint(f"memory device #{n}", down, up)

    async def serve(self, handler: ConnectionHandler, ready: asyncio.Event | None = None,
                    services: LinkServices | None = None) -> None:
        if ready is not None:
            ready.set()
        async with asyncio.TaskGroup() as tg:
            while True:
                tg.create_task(handler(await self._pending.get()))
