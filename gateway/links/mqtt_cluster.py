"""The MQTT side of cluster mode (gateway/cluster/node.py decides, this file speaks MQTT 5).

`MqttClusterPort` is the node's `ClusterPort` over the MQTT link's client: QoS 1 publishes (the
member record retained with a message expiry, so a dead member's record does not outlive it on the
broker; the turn events for the screens at QoS 0), subscriptions of the owned devices' `P/D/up`, and the sessions the link opens or ends.
`lease_properties` tags every downlink with its lease (`lease` = `<gateway>:<epoch>` as an MQTT 5
user property; devices ignore it, an observer can check that no two gateways answered a device
under overlapping leases).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from gateway.links.mqtt_client import AsyncPaho

if TYPE_CHECKING:
    from gateway.links.mqtt import MqttLink

LEASE_PROPERTY = "lease"


def lease_properties(gateway: str, epoch: int) -> Properties:
    props = Properties(PacketTypes.PUBLISH)
    props.UserProperty = (LEASE_PROPERTY, f"{gateway}:{epoch}")
    return props


def lease_of(properties: Properties | None) -> tuple[str, int] | None:
    """(gateway, epoch) of a downlink's lease property, or None."""
    for key, value in (properties.json().get("UserProperty", []) if properties is not None else []):
        if key == LEASE_PROPERTY:
            gateway, _, epoch = value.rpartition(":")
            return gateway, int(epoch)
    return None


def expiry_of(properties: Properties | None) -> int | None:
    """A publish's MQTT 5 message expiry interval, None without one (or over MQTT 3.1.1)."""
    if properties is None:
        return None
    expiry = properties.json().get("MessageExpiryInterval")
    return int(expiry) if expiry is not None else None


class MqttClusterPort:
    def __init__(self, link: "MqttLink", client: AsyncPaho) -> None:
        self._link = link
        self._client = client

    def publish(self, topic: str, payload: bytes, *, retain: bool = False, expiry_s: int | None = None,
                qos: int = 1) -> None:
        props = None
        if expiry_s is not None:
            props = Properties(PacketTypes.PUBLISH)
            props.MessageExpiryInterval = expiry_s
        self._client.publish(topic, payload, qos, retain, properties=props)

    def subscribe(self, topic: str) -> None:
        self._client.subscribe(topic, 1)

    def unsubscribe(self, topic: str) -> None:
        self._client.unsubscribe(topic)

    def take_over(self, device_id: str, epoch: int) -> None:
        self._link.open_leased(device_id)

    def hand_over(self, device_id: str, reason: str) -> None:
        self._link.end_session(device_id, reason)
