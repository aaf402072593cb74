"""This member's record on the broker, and what it hears of the other members' records.

Every member publishes `P/$cluster/members/<id>` (retained, with an MQTT 5 message expiry of the
member timeout: a dead member's record does not outlive it) every heartbeat; its Last Will, an
empty retained message on the same topic, deletes it, and so does a clean leave. The live members
(gateway/cluster/members.py) place the MQTT devices (gateway/cluster/node.py).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator

from gateway.cluster.members import MemberList, MemberRecord
from gateway.cluster.port import ClusterPort

log = logging.getLogger(__name__)


class Membership:
    def __init__(self, me: str, prefix: str, *, heartbeat_s: float, timeout_s: float, capacity: int,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.me = me
        self.prefix = prefix
        self.heartbeat_s = heartbeat_s
        self.timeout_s = timeout_s
        self.members = MemberList(me, timeout_s, clock)
        self.record = MemberRecord(me, time.time(), capacity)
        self._no_expiry: set[str] = set()  # members whose record came without a message expiry (warned)

    def topic(self, member: str) -> str:
        return f"{self.prefix}/$cluster/members/{member}"

    def live(self) -> tuple[str, ...]:
        return self.members.live()

    def heard(self, name: str, payload: bytes, expiry_s: int | None) -> bool:
        """The record of member `name` (empty: deleted), with its MQTT 5 message expiry if any:
        True when the live members changed."""
        if payload and expiry_s is None and name != self.me and name not in self._no_expiry:
            self._no_expiry.add(name)  # every member publishes its record with one
            log.warning("cluster %s: the member record of %s came without its MQTT 5 message expiry: the "
                        "broker or a bridge on the way speaks MQTT 3.1.1 (mosquitto bridges: "
                        "bridge_protocol_version mqttv50); the lease tags of its downlinks do not reach the "
                        "devices either (docs/SCALE-OUT.md \"Across a bridge\")", self.me, name)
        if (change := self.members.heard(name, payload)) is None:
            return False
        log.info("cluster %s: member %s %s (members: %s)", self.me, name, change, ", ".join(self.live()))
        return True

    def expired(self) -> Iterator[str]:
        """The members not heard within the timeout, each logged as gone before it is yielded."""
        for member in self.members.expire():
            log.info("cluster %s: member %s gone: no heartbeat for %.0f s (members: %s)", self.me, member,
                     self.timeout_s, ", ".join(self.live()))
            yield member

    def beat(self, port: ClusterPort) -> None:
        """This member's record, again (MQTT 5 message expiry: a dead member's does not outlive it)."""
        port.publish(self.topic(self.me), self.record.encode(), retain=True, expiry_s=max(1, round(self.timeout_s)))

    def leave(self, port: ClusterPort) -> None:
        port.publish(self.topic(self.me), b"", retain=True)
