"""The device side of the MQTT link (for `gateway simulate --transport mqtt` and tests).

It does what an ESP32 MQTT device does: logs in as its device id with its token, sets the last
will `offline` (retained) on `P/D/status`, publishes `online`, subscribes `P/D/down` (QoS 1) and
publishes messages on `P/D/up` (audio at QoS 0, everything else at QoS 1).
"""

from __future__ import annotations

import asyncio

import paho.mqtt.client as paho

from firmware_protocol import Message, ProtocolError, decode, encode
from gateway.links.base import LinkClosed
from gateway.links.mqtt import qos_for
from gateway.links.mqtt_client import AsyncPaho, Will


class MqttDevice:
    def __init__(self, device_id: str, token: str = "", prefix: str = "gw", protocol: str = "3.1.1") -> None:
        self.device_id = device_id
        self.peer = f"mqtt device {device_id}"
        self._base = f"{prefix}/{device_id}"
        self._inbox: asyncio.Queue[Message | ProtocolError] = asyncio.Queue()
        self._client = AsyncPaho(
            device_id, self._on_message, protocol=protocol, username=device_id, password=token or None,
            persistent=True, will=Will(f"{self._base}/status", b"offline"), on_connect=self._on_connect,
        )

    def _on_connect(self) -> None:
        self._client.subscribe(f"{self._base}/down", 1)
        self._client.publish(f"{self._base}/status", b"online", 1, retain=True)

    def _on_message(self, msg: paho.MQTTMessage) -> None:
        try:
            self._inbox.put_nowait(decode(msg.payload))
        except ProtocolError as exc:
            self._inbox.put_nowait(exc)

    async def connect(self, host: str, port: int) -> None:
        """Raises MqttConnectError when the broker is unreachable or refuses the login."""
        await self._client.connect(host, port)

    async def send(self, message: Message) -> None:
        if self._client.disconnected.is_set():
            raise LinkClosed("not connected to the broker")
        self._client.publish(f"{self._base}/up", encode(message), qos_for(message))

    async def receive(self) -> Message | ProtocolError:
        return await self._inbox.get()

    async def close(self, reason: str = "") -> None:
        self._client.publish(f"{self._base}/status", b"offline", 1, retain=True)
        await self._client.disconnect()
