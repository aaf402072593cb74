"""One device's session on the MQTT link: its bounded inbox and its way down.

The link (gateway/links/mqtt.py) delivers what arrives on `P/D/up` into the device's inbox; when
the core falls behind, newer messages are dropped and counted (audio is real-time anyway; an
unacked SensorReading is resent by the device). Sending goes back through the link.

An MQTT device has no connection to the gateway that breaks when it goes away without its last
will (a clean disconnect, a broker that lost it): the link's idle check (`check_idle`, with
server.session_idle_s) sends a session that heard nothing for that long a Ping, and ends it with
Error `idle-timeout` when nothing arrives within the probe time after it. The device's next message opens a new session,
which answers `hello-required` (PROTOCOL.md): a live device that was merely quiet says Hello again.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from typing import Protocol

from firmware_protocol import Error, Message, Ping, ProtocolError
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
        self.last_heard = time.monotonic()  # the device's last message
        self.pinged_at: float | None = None  # when the idle check sent a Ping still unanswered

    def deliver(self, item: Message | ProtocolError) -> None:
        self.last_heard, self.pinged_at = time.monotonic(), None
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

    def check_idle(self, now: float, idle_s: float, probe_s: float) -> None:
        """Called by the link now and then: a Ping after `idle_s` of silence, the end when it
        stays unanswered for `probe_s` (no timer per message: the readings path stays cheap)."""
        if self._closed is not None:
            return
        try:
            if self.pinged_at is None:
                if now - self.last_heard >= idle_s:
                    self.pinged_at = now
                    self._link.publish_down(self.device_id, Ping(nonce=0))
            elif now - self.pinged_at >= probe_s:
                text = f"no message for {idle_s:g} s and no answer to a Ping within {probe_s:g} s"
                log.warning("%s: idle-timeout: %s (server.session_idle_s); session closed", self.peer, text)
                self.end(f"idle-timeout: {text}")
                self._link.publish_down(self.device_id, Error(code="idle-timeout", text=text))
        except LinkClosed:  # off the broker: the next round tries again
            pass

    async def send(self, message: Message) -> None:
        if self._closed is not None:
            raise LinkClosed(self._closed)
        self._link.publish_down(self.device_id, message)

    async def close(self, reason: str = "") -> None:
        self.end(reason or "closed")
        self._link.forget(self)
