"""The device side of the CoAP link (for `gateway simulate --transport coap` and tests).

Like a CoAP voice box: POSTs each message to `/gw/D/up` (waiting for each response, so the
gateway sees them in order), observes `/gw/D/down` after its Hello, and deframes the byte stream
that arrives in POST responses and notifications.
"""

from __future__ import annotations

import asyncio
import contextlib

import aiocoap

from firmware_protocol import Hello, Message, ProtocolError, StreamDeframer, encode
from gateway.links.base import LinkClosed


class CoapDevice:
    def __init__(self, device_id: str, base_uri: str) -> None:
        self.device_id = device_id
        self.peer = f"coap device {device_id}"
        self._up = f"{base_uri.rstrip('/')}/{device_id}/up"
        self._down = f"{base_uri.rstrip('/')}/{device_id}/down"
        self._deframer = StreamDeframer()
        self._inbox: asyncio.Queue[Message | ProtocolError] = asyncio.Queue()
        self._ctx: aiocoap.Context | None = None
        self._observer: asyncio.Task[None] | None = None

    async def connect(self) -> None:
        self._ctx = await aiocoap.Context.create_client_context()

    def _feed(self, payload: bytes) -> None:
        for item in self._deframer.feed(payload):
            self._inbox.put_nowait(item)

    async def send(self, message: Message) -> None:
        if self._ctx is None:
            raise LinkClosed("not connected")
        request = aiocoap.Message(code=aiocoap.POST, uri=self._up, payload=encode(message))
        try:
            response = await self._ctx.request(request).response
        except aiocoap.error.Error as exc:
            raise LinkClosed(f"CoAP request failed: {exc}") from None
        if not response.code.is_successful():
            raise LinkClosed(f"gateway answered {response.code}")
        self._feed(response.payload)
        if isinstance(message, Hello) and self._observer is None:
            self._observer = asyncio.create_task(self._observe())

    async def _observe(self) -> None:
        assert self._ctx is not None
        request = self._ctx.request(aiocoap.Message(code=aiocoap.GET, uri=self._down, observe=0))
        self._feed((await request.response).payload)
        async for notification in request.observation:
            self._feed(notification.payload)

    async def receive(self) -> Message | ProtocolError:
        return await self._inbox.get()

    async def close(self, reason: str = "") -> None:
        if self._observer is not None:
            self._observer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._observer
        if self._ctx is not None:
            await self._ctx.shutdown()
            self._ctx = None
