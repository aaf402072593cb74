"""An observer of every device's downlink in cluster mode, for the cluster tests and benchmark.

It subscribes `P/+/down` as an MQTT 5 client and records, for each publish, the device, the
message type and the lease it was sent under (the `lease` user property the gateways add,
gateway/links/mqtt_cluster.py). `overlaps()` lists the devices answered against the fence: a
downlink under an older epoch after one under a newer epoch, or one epoch used by two gateways.
It stays connected (a broker restart: it reconnects and subscribes again by itself).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass

import paho.mqtt.client as paho

from firmware_protocol import ProtocolError, decode
from gateway.links.mqtt_client import AsyncPaho
from gateway.links.mqtt_reconnect import stay_connected
from gateway.links.mqtt_cluster import lease_of


@dataclass(frozen=True)
class Downlink:
    at: float  # monotonic, when the observer received it
    device_id: str
    message: str  # the message's NAME ("welcome", "reading_ack", ...), "?" when it does not decode
    gateway: str | None  # the lease it was sent under; None: sent without one
    epoch: int | None


class DownlinkLog:
    def __init__(self, prefix: str = "gw", client_id: str = "downlink-observer") -> None:
        self.prefix = prefix
        self.seen: list[Downlink] = []
        self._client = AsyncPaho(client_id, self._on_message, protocol="5", persistent=False,
                                 on_connect=lambda: self._client.subscribe(f"{prefix}/+/down", 1))
        self.connected = asyncio.Event()  # set while connected to the broker
        self._task: asyncio.Task[None] | None = None

    def _on_message(self, msg: paho.MQTTMessage) -> None:
        parts = msg.topic.split("/")
        try:
            name = decode(msg.payload).NAME
        except ProtocolError:
            name = "?"
        lease = lease_of(msg.properties)
        self.seen.append(Downlink(time.monotonic(), parts[1], name, *(lease or (None, None))))

    async def connect(self, host: str, port: int) -> None:
        """Connected and subscribed when it returns; reconnects by itself from then on."""
        ready = asyncio.Event()
        self._task = asyncio.create_task(stay_connected(self._client, host, port, "downlink observer", ready,
                                                        self.connected), name="downlink observer")
        await ready.wait()
        await self.connected.wait()

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def overlaps(self) -> list[str]:
        """Devices answered by two gateways under overlapping leases (or without a lease); [] is right."""
        bad = []
        by_device: dict[str, list[Downlink]] = {}
        for d in self.seen:
            by_device.setdefault(d.device_id, []).append(d)
        for device_id, downs in sorted(by_device.items()):
            holders: dict[int, str] = {}
            newest = -1
            for d in downs:
                if d.epoch is None or d.gateway is None:
                    bad.append(f"{device_id}: a {d.message} without a lease")
                    break
                if holders.setdefault(d.epoch, d.gateway) != d.gateway:
                    bad.append(f"{device_id}: epoch {d.epoch} used by {holders[d.epoch]} and {d.gateway}")
                    break
                if d.epoch < newest:
                    bad.append(f"{device_id}: a {d.message} from {d.gateway} under epoch {d.epoch} after epoch {newest}")
                    break
                newest = max(newest, d.epoch)
        return bad

    def first_welcome_after(self, device_id: str, after: float, not_from: str) -> float | None:
        """When `device_id` was first welcomed by another gateway than `not_from` after `after`."""
        return self.first_after(device_id, after, not_from, "welcome")

    def first_after(self, device_id: str, after: float, not_from: str, message: str) -> float | None:
        """When another gateway than `not_from` first sent `device_id` a `message` after `after`
        ("error": the new holder's hello-required, right after it took the lease)."""
        for d in self.seen:
            if d.device_id == device_id and d.at > after and d.message == message and d.gateway != not_from:
                return d.at
        return None

    def holder_at(self, device_id: str, at: float) -> str | None:
        """The gateway of the device's last downlink before `at`."""
        last = None
        for d in self.seen:
            if d.device_id == device_id and d.at <= at:
                last = d.gateway
        return last
