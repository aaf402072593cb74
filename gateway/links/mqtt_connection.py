"""One device's session on the MQTT link: its bounded inbox and its way down.

The link (gateway/links/mqtt.py) delivers what arrives on `P/D/up` into the device's inbox; when
the core falls behind, newer messages are dropped and counted (audio is real-time anyway; an
unacked SensorReading is resent by the device). Sending goes back through the link.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from typing import Protocol

from firmware_protocol import Message, ProtocolError
from gateway.links.base import LinkClosed, ManyInFlight

log = logging.getLogger("gateway.links.mqtt")  # the link's log lines, as before the split


class MqttDownlink(Protocol):
    """What a device connection needs of its link."""

    inbox_messages: int  # per device; newer messages are dropped when full

    def publish_down(self, device_id: str, message: Message) -> None: ...
    def forget(self, conn: "MqttDeviceConnection") -> None: ...


class MqttDeviceConnection(ManyInFlight):
    """The gateway's view of one device reachable under `P/D/`."""

    def __init__(self, link: MqttDownlink, device_id: str) -> None:
        self.peer = f"mqtt {device_id}"
        self.device_id = device_id
        self._link = link
        self._inbox: deque[Message | ProtocolError] = deque()
        self._ready = asyncio.Event()
        self._closed: str | None = None
        self.dropped = 0

    def deliver(self, item: Message | ProtocolError) -> None:
        if len(self._inbox) >= self._link.inbox_messages:
            self.dropped += 1
            if self.dropped in (1, 10, 100) or self.dropped % 1000 == 0:
                log.warning("%s: inbox full, dropped %d messages so far", self.peer, self.dropped)
            return
        self._inbox.append(item)
        self._ready.set()

    def end(self, reason: str) -> None:
        if self._closed is None:
            self._closed = reason
        self._ready.set()

    async def receive(self) -> Message | ProtocolError:
        while not self._inbox:
            if self._closed is not None:
                raise LinkClosed(self._closed)
            self._ready.clear()
            await self._ready.wait()
        return self._inbox.popleft()

    async def send(self, message: Message) -> None:
        if self._closed is not None:
            raise LinkClosed(self._closed)
        self._link.publish_down(self.device_id, message)

    async def close(self, reason: str = "") -> None:
        self.end(reason or "closed")
        self._link.forget(self)
