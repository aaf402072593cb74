"""What the cluster node needs of the MQTT link, and what a roaming session gives it.

The MQTT link (gateway/links/mqtt_cluster.py) gives the node (gateway/cluster/node.py) a
`ClusterPort` to publish, subscribe and open or end device sessions; a WebSocket / CoAP session
that `take`s its device's lease (gateway/cluster/roaming_leases.py) gives it a
`SessionLost` callback.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol


class ClusterPort(Protocol):
    """What the node needs of the MQTT link (gateway/links/mqtt_cluster.py)."""

    def publish(self, topic: str, payload: bytes, *, retain: bool = False, expiry_s: int | None = None,
                qos: int = 1) -> None: ...

    def subscribe(self, topic: str) -> None: ...

    def unsubscribe(self, topic: str) -> None: ...

    def take_over(self, device_id: str, epoch: int) -> None:
        """The lease is this gateway's: open the device's session and ask it for a Hello."""
        ...

    def hand_over(self, device_id: str, reason: str) -> None:
        """The lease is gone: end the device's session without another word to it."""
        ...


SessionLost = Callable[[str], None]  # a WebSocket / CoAP session's: its lease is gone (why)
