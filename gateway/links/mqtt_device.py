"""The device side of the MQTT link (for `gateway simulate --transport mqtt` and tests).

It does what an ESP32 MQTT device does: logs in as its device id with its token (no token: an
anonymous login with client id = device id, which open enrolment confines to that id's topics),
sets the last will `offline` (retained) on `P/D/status`, publishes `online`, subscribes `P/D/down`
(QoS 1) and publishes messages on `P/D/up` (audio at QoS 0, everything else at QoS 1). Only a
publish on its own `P/D/down` is decoded; one on any other topic (a broker handing out other
devices' retained status) is ignored with a warning, never taken for a message to it.
"""

from __future__ import annotations

import asyncio
import logging

import paho.mqtt.client as paho

from firmware_protocol import Message, ProtocolError, decode, encode
from gateway.links.base import LinkClosed
from gateway.links.mqtt_client import AsyncPaho, Will
from gateway.links.mqtt_topics import qos_for

log = logging.getLogger(__name__)


class MqttDevice:
    def __init__(self, device_id: str, token: str = "", prefix: str = "gw", protocol: str = "3.1.1") -> None:
        self.device_id = device_id
        self.peer = f"mqtt device {device_id}"
        self._base = f"{prefix}/{device_id}"
        self._down = f"{self._base}/down"
        self.ignored = 0  # publishes on other topics than its own downlink
        self._inbox: asyncio.Queue[Message | ProtocolError] = asyncio.Queue()
        self._client = AsyncPaho(
            device_id, self._on_message, protocol=protocol, username=device_id if token else None,
            password=token or None,
            persistent=True, will=Will(f"{self._base}/status", b"offline"), on_connect=self._on_connect,
        )

    def _on_connect(self) -> None:
        self._client.subscribe(self._down, 1)
        self._client.publish(f"{self._base}/status", b"online", 1, retain=True)

    def _on_message(self, msg: paho.MQTTMessage) -> None:
        if msg.topic != self._down:
            self.ignored += 1
            log.warning("%s: ignored a publish on %s (%d bytes): not its downlink %s", self.peer, msg.topic,
                        len(msg.payload), self._down)
            return
        try:
            self._inbox.put_nowait(decode(msg.payload))
        except ProtocolError as exc:
            self._inbox.put_nowait(exc)

    async def connect(self, host: str, port: int) -> None:
        """Raises MqttConnectError when the broker is unreachable or refuses the login."""
        await self._client.connect(host, port)

    @property
    def disconnected(self) -> asyncio.Event:
        """Set when the broker connection is lost (or closed); `connect` again to come back."""
        return self._client.disconnected

    async def send(self, message: Message) -> None:
        await self.send_encoded(encode(message), qos_for(message))

    async def send_encoded(self, data: bytes, qos: int = 1) -> None:
        """A message encoded beforehand (`encode`), e.g. a benchmark's readings: published as is."""
        if self._client.disconnected.is_set():
            raise LinkClosed("not connected to the broker")
        self._client.publish(f"{self._base}/up", data, qos)

    async def receive(self) -> Message | ProtocolError:
        return await self._inbox.get()

    async def close(self, reason: str = "") -> None:
        self._client.publish(f"{self._base}/status", b"offline", 1, retain=True)
        await self._client.disconnect()
