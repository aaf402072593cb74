"""The leases of this member's WebSocket and CoAP sessions: devices that roam between members.

WebSocket and CoAP devices are not placed: a load balancer or DNS in front of the members picks
one, and the device's session there `take`s its lease at its Hello, from whichever member held it
(the box reconnected through this one; docs/SCALE-OUT.md "WebSocket, CoAP and serial devices").
The node (gateway/cluster/node.py) renews it with the others (also while off the broker: those
devices do not reach it there) until the session `drop`s it; when another member takes it, the
session's `on_lost` ends it: as soon as that member's directory record arrives (one broker hop:
`taken_elsewhere`), or at the failed renewal. Their directory record says whether the session
lives (this member's own records: gateway/cluster/own_records.py).

`RoamingLeases` is what a session needs of the cluster (gateway/devices/session_lease.py
`DeviceLeases`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from gateway.cluster.directory import DeviceDirectory, Served
from gateway.cluster.held import HeldLeases
from gateway.cluster.leases import LeaseStoreDown, PgLeases
from gateway.cluster.own_records import OwnRecords
from gateway.cluster.port import SessionLost

log = logging.getLogger(__name__)


class RoamingLeases:
    def __init__(self, me: str, leases: PgLeases, held: HeldLeases, directory: DeviceDirectory,
                 own_records: OwnRecords, release: Callable[[str], None],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.me = me
        self._leases = leases
        self._held = held  # shared with the node, which renews them
        self._directory = directory
        self._own_records = own_records
        self._release = release  # (device_id): the node releases its lease at its next tick
        self._clock = clock
        self.sessions: dict[str, SessionLost] = {}  # held devices whose lease a session took (`take`)
        self.takeovers = 0  # leases taken for a session
        self._leaving = False  # a clean stop has begun: no more takes

    def lease(self, device_id: str) -> int | None:
        """The epoch of this gateway's lease on the device, while it is surely valid; else None."""
        return self._held.epoch(device_id)

    async def take(self, device_id: str, on_lost: SessionLost) -> int | None:
        """A WebSocket or CoAP session's Hello: the device's lease is this gateway's from now on, taken
        over from the member holding it, if any (the device chose this one). Its epoch, renewed until
        `drop`; `on_lost(why)` is called (once) if it goes first. None: not taken (PostgreSQL did not
        answer, logged; or this member is leaving)."""
        if self._leaving:
            return None
        started = self._clock()
        try:
            epoch, previous = (await self._leases.take([device_id]))[device_id]
        except LeaseStoreDown as exc:
            log.warning("cluster %s: could not take the lease on %s for its session (PostgreSQL: %s)",
                        self.me, device_id, exc)
            return None
        if self._leaving:  # the node's leave() releases every lease of this member
            return None
        self._held.grant(device_id, epoch, started)
        self.sessions[device_id] = on_lost  # a session it replaces on this member holds an older epoch
        self.takeovers += 1
        log.info("cluster %s: took the lease on %s (epoch %d) for its session here%s", self.me, device_id, epoch,
                 f", from {previous}, which held it" if previous else "")
        self._own_records.publish(Served(self.me, epoch, time.time(), session=True), device_id)  # the member
        return epoch  # that held it stops at once

    def drop(self, device_id: str, epoch: int) -> None:
        """The session that took the lease `epoch` has ended: released, unless a newer one holds it."""
        lease = self._held.get(device_id)
        if device_id in self.sessions and lease is not None and lease.epoch == epoch:
            del self._held[device_id], self.sessions[device_id]
            self._own_records.session_ended(device_id, epoch)
            self._release(device_id)

    def taken_elsewhere(self, device_id: str) -> None:
        """A session's device whose directory record names another member under a newer epoch: that
        member took the lease since (epochs only grow): this session stops now, not at the renewal."""
        served, lease = self._directory.served(device_id), self._held.get(device_id)
        if (device_id in self.sessions and lease is not None and served is not None and served.gateway != self.me
                and served.epoch > lease.epoch):
            del self._held[device_id]
            log.warning("cluster %s: %s took the lease on %s (epoch %d): its session here ends", self.me,
                        served.gateway, device_id, served.epoch)
            self.lost(device_id, f"gateway {served.gateway} took its lease (epoch {served.epoch})")

    def lost(self, device_id: str, reason: str) -> bool:
        """The device's lease is gone: True if a session here had taken it (told why, once)."""
        if (on_lost := self.sessions.pop(device_id, None)) is None:
            return False
        on_lost(reason)
        return True

    def leave(self) -> None:
        """A clean stop: no more takes; the sessions find no lease for their next downlink."""
        self._leaving = True
        self.sessions.clear()
