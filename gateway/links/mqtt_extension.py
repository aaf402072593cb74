"""Another device protocol served on the MQTT link's broker beside the gateway's own topics.

The xiaozhi boxes' MQTT+UDP transport (gateway/links/xiaozhi/mqtt_udp.py) is one: its topics,
its broker rules and its own sockets (UDP audio). `MqttLink` subscribes to `topic_filters`, hands
every publish on a topic the extension `owns` to it, lets it `publish` through the gateway's
client, and runs `serve` beside its own supervision. The embedded broker asks it which topics a
login may use (`allows`; None: not one of its topics) and which ones to subscribe a login to
when it connects (`pushed_topics`: for clients that never subscribe themselves), and tells it
when a login leaves (`client_left`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from gateway.links.base import ConnectionHandler, LinkServices

RawPublish = Callable[[str, bytes], None]  # (topic, payload) at QoS 0; raises LinkClosed when offline


@dataclass(frozen=True)
class BrokerAddress:
    host: str  # "" for the embedded broker: devices reach it where they reach the gateway
    port: int
    embedded: bool


class MqttExtension(Protocol):
    name: str
    topic_filters: tuple[str, ...]

    def owns(self, topic: str) -> bool: ...

    def on_message(self, topic: str, payload: bytes) -> None: ...

    def allows(self, username: str | None, topic: str, publish: bool) -> bool | None: ...

    def pushed_topics(self, username: str | None) -> tuple[str, ...]: ...

    def client_left(self, username: str | None) -> None: ...

    async def serve(self, publish: RawPublish, handler: ConnectionHandler, services: LinkServices,
                    broker: BrokerAddress, ready: asyncio.Event) -> None:
        """Run until cancelled; set `ready` once listening; raise OSError when it cannot listen."""
        ...
