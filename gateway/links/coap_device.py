"""The device side of the CoAP link (for `gateway simulate --transport coap` and tests).

Like a CoAP voice box: POSTs each message to `/gw/D/up` (waiting for each response, so the
gateway sees them in order), observes `/gw/D/down` after its Hello, and deframes the byte stream
that arrives in POST responses and notifications. Every request after the Hello carries the
session token, the session_id of the Welcome, as `?s=<token>`.
"""

from __future__ import annotations

import asyncio
import contextlib
from urllib.parse import quote

import aiocoap

from firmware_protocol import Hello, Message, ProtocolError, StreamDeframer, Welcome, encode
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
        self._token = ""  # the session token, from the Welcome

    def _uri(self, base: str) -> str:
        return f"{base}?s={quote(self._token, safe='')}" if self._token else base

    async def connect(self) -> None:
        self._ctx = await aiocoap.Context.create_client_context()

    def _feed(self, payload: bytes) -> None:
        for item in self._deframer.feed(payload):
            if isinstance(item, Welcome):
                self._token = item.session_id
            self._inbox.put_nowait(item)

    async def send(self, message: Message) -> None:
        if self._ctx is None:
            raise LinkClosed("not connected")
        uri = self._up if isinstance(message, Hello) else self._uri(self._up)
        request = aiocoap.Message(code=aiocoap.POST, uri=uri, payload=encode(message))
        try:
            response = await self._ctx.request(request).response
        except aiocoap.error.Error as exc:
            raise LinkClosed(f"CoAP request failed: {exc}") from None
        if not response.code.is_successful():
            raise LinkClosed(f"gateway answered {response.code} {response.payload.decode(errors='replace')}")
        self._feed(response.payload)
        if isinstance(message, Hello):  # a new session: observe its downlink with its token
            await self._stop_observing()
            self._observer = asyncio.create_task(self._observe())

    async def _observe(self) -> None:
        assert self._ctx is not None
        request = self._ctx.request(aiocoap.Message(code=aiocoap.GET, uri=self._uri(self._down), observe=0))
        self._feed((await request.response).payload)
        async for notification in request.observation:
            self._feed(notification.payload)

    async def receive(self) -> Message | ProtocolError:
        return await self._inbox.get()

    async def _stop_observing(self) -> None:
        if self._observer is not None:
            self._observer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._observer
            self._observer = None

    async def close(self, reason: str = "") -> None:
        await self._stop_observing()
        if self._ctx is not None:
            await self._ctx.shutdown()
            self._ctx = None
