"""The one interface between transports and the core.

A *link* (WebSocket, in-memory, later MQTT/CoAP/serial) accepts device connections and hands
each one to the core as a `DeviceConnection`. The link turns bytes into messages of the wire
contract; bytes that do not decode come out as a `ProtocolError` value (not an exception), so the
core answers with an `Error` message, logs the peer and the reason, and keeps serving.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Protocol

from firmware_protocol import Message, ProtocolError


class LinkClosed(Exception):
    """The connection is gone (peer closed, network lost)."""


class DeviceConnection(Protocol):
    peer: str  # human-readable "transport address", used in every log line about this device

    async def receive(self) -> Message | ProtocolError:
        """Next inbound message, or the error for an undecodable frame. Raises LinkClosed."""
        ...

    async def send(self, message: Message) -> None:
        """Send one message. Raises LinkClosed."""
        ...

    async def close(self, reason: str = "") -> None: ...


ConnectionHandler = Callable[[DeviceConnection], Awaitable[None]]


class DeviceLink(Protocol):
    name: str

    async def serve(self, handler: ConnectionHandler, ready: asyncio.Event | None = None) -> None:
        """Accept connections and run `handler` for each until cancelled. Sets `ready` once listening."""
        ...
