"""One gateway's part in the cluster: device ownership and the device leases.

The MQTT link (gateway/links/mqtt_cluster.py) feeds the node what it hears on the broker (member
records, device status, directory records) and gives it a `ClusterPort` (gateway/cluster/port.py)
to publish, subscribe and open or end device sessions. The node decides:

- the live members (this member's record and the others': gateway/cluster/membership.py) and, by
  rendezvous hashing over them, the online devices this gateway owns: it subscribes `P/D/up` only
  for those (every gateway hears `P/+/status`, a few bytes per device, not the cluster's audio);
- for each owned device, the lease (gateway/cluster/leases.py; the ones held:
  gateway/cluster/held.py), claimed again every
  `CLAIM_RETRY_S` while another gateway's lease has not run out; once it holds it, the link opens
  the device's session and asks the device for a Hello (Error `hello-required`, to which devices
  say Hello and resend what was not answered: PROTOCOL.md "MQTT");
- renewal every `lease_ttl_s / 3` while connected to the broker; a lease not renewed in time
  (database down, broker lost) ends the device's session before it could have expired in the
  database, so a gateway that cannot prove its lease stays silent;
- a device that moved to another member, or went offline, is unsubscribed, its session ended and
  its lease released; `leave` (a clean stop) deletes the member record and releases every lease.

WebSocket and CoAP devices are not placed: their sessions `take` their leases at their Hello
(`roaming`, gateway/cluster/roaming_leases.py); the node renews those with the others (also while
off the broker: those devices do not reach it there). The directory records (gateway/cluster/
directory.py; this member's own: gateway/cluster/own_records.py) say who serves each device.

`share_events` publishes this member's turn events for the other members' screens and puts
theirs on this gateway's bus (gateway/cluster/events.py).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from gateway.bus import EventBus
from gateway.cluster.directory import DeviceDirectory, DeviceEntry, Served
from gateway.cluster.events import SHARED_EVENTS, ClusterEvents
from gateway.cluster.held import HeldLeases
from gateway.cluster.leases import LeaseStoreDown, PgLeases
from gateway.cluster.membership import Membership
from gateway.cluster.own_records import OwnRecords
from gateway.cluster.port import ClusterPort
from gateway.cluster.rendezvous import owner
from gateway.cluster.roaming_leases import RoamingLeases

log = logging.getLogger(__name__)

CLAIM_RETRY_S = 0.5  # an owned device whose lease someone else still holds: try again this often
TICK_S = 0.2  # the node's timer
OUTAGE_LOG_S = 10.0  # "PostgreSQL unreachable" at most once per this interval


class ClusterNode:
    def __init__(self, me: str, prefix: str, leases: PgLeases, *, heartbeat_s: float, member_timeout_s: float,
                 lease_ttl_s: float, capacity: int = 0, client_id: str = "",
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.me = me
        self.client_id = client_id or me  # the MQTT client id of this member's link
        self.prefix = prefix
        self.leases = leases
        self.ttl_s = lease_ttl_s
        self.membership = Membership(me, prefix, heartbeat_s=heartbeat_s, timeout_s=member_timeout_s,
                                     capacity=capacity, clock=clock)
        self.directory = DeviceDirectory()
        self.events = ClusterEvents(me, prefix)
        self._bus: EventBus | None = None  # where the other members' turn events go (share_events)
        self._clock = clock
        self.owned: set[str] = set()  # online devices this gateway owns by the member list (subscribed)
        self.held = HeldLeases(lease_ttl_s, clock)
        self.own_records = OwnRecords(me, self.directory, self._publish_record)  # this member's directory records
        # the WebSocket / CoAP sessions' leases (what app.py hands those sessions)
        self.roaming = RoamingLeases(me, leases, self.held, self.directory, self.own_records, self._release_later,
                                     clock)
        self._tried: dict[str, float] = {}  # device -> when its lease was last claimed in vain
        self._to_release: set[str] = set()
        self._port: ClusterPort | None = None
        self._wake = asyncio.Event()
        self._outage_logged = -OUTAGE_LOG_S
        self._leaving = False  # a clean stop has begun: no more claims or renewals
        self._claimed = 0  # leases claimed for MQTT devices

    @property
    def takeovers(self) -> int:
        """Leases taken (each one a device served from then on)."""
        return self._claimed + self.roaming.takeovers

    # -- topics ---------------------------------------------------------------------------------

    def up_topic(self, device_id: str) -> str:
        return f"{self.prefix}/{device_id}/up"

    @property
    def will_topic(self) -> str:
        """The Last Will (an empty retained message) deletes this gateway's member record."""
        return self.membership.topic(self.me)

    def owns_topic(self, topic: str) -> bool:
        return topic.startswith(f"{self.prefix}/$cluster/")

    # -- what the link hears (on the event loop) -------------------------------------------------

    def on_connected(self, port: ClusterPort) -> None:
        """(Re)connected to the broker with a clean session: subscribe everything again."""
        self._port = port
        port.subscribe(f"{self.prefix}/$cluster/members/+")
        port.subscribe(f"{self.prefix}/$cluster/devices/+")
        port.subscribe(f"{self.prefix}/+/status")
        port.subscribe(self.events.topic_filter)
        for device_id in sorted(self.owned):
            port.subscribe(self.up_topic(device_id))
        self._heartbeat()
        self._wake.set()

    def on_disconnected(self) -> None:
        self._port = None

    def on_message(self, topic: str, payload: bytes, expiry_s: int | None = None) -> None:
        """A publish on a `P/$cluster/` topic; `expiry_s`: its MQTT 5 message expiry, if any."""
        parts = topic.split("/")
        if len(parts) != 4:
            return
        kind, name = parts[2], parts[3]
        if kind == "members":
            if self.membership.heard(name, payload, expiry_s):
                self._recompute()
        elif kind == "devices":
            self.directory.heard(name, payload)
            self.roaming.taken_elsewhere(name)
            held = self.held.get(name)
            self.own_records.answer_older(name, held.epoch if held is not None else None)
        elif kind == "events" and self._bus is not None:
            self.events.incoming(name, payload, self._bus.publish)

    def on_status(self, device_id: str, online: bool) -> None:
        self.directory.status(device_id, online)
        self._recompute()

    # -- what the link asks -----------------------------------------------------------------------

    def lease(self, device_id: str) -> int | None:
        """The epoch of this gateway's lease on the device, while it is surely valid; else None."""
        return self.held.epoch(device_id)

    def devices(self) -> list[DeviceEntry]:
        """Every device the cluster knows and which live member serves it."""
        return self.directory.entries(self.membership.live())

    # -- decisions --------------------------------------------------------------------------------

    def _recompute(self) -> None:
        live = self.membership.live()
        owned = {d for d in self.directory.online() if owner(d, live) == self.me}
        for device_id in sorted(owned - self.owned):
            if self._port is not None:
                self._port.subscribe(self.up_topic(device_id))
        for device_id in sorted(self.owned - owned):
            if self._port is not None:
                self._port.unsubscribe(self.up_topic(device_id))
            self._tried.pop(device_id, None)
            if self.held.pop(device_id, None) is not None:
                self._to_release.add(device_id)
                self._hand_over(device_id, "another gateway owns it now" if device_id in self.directory.online()
                                else "it went offline")
        self.owned = owned
        self._wake.set()

    def _hand_over(self, device_id: str, reason: str) -> None:
        if not self.roaming.lost(device_id, reason) and self._port is not None:  # not a WebSocket / CoAP
            self._port.hand_over(device_id, reason)  # session's: an MQTT device's

    def _release_later(self, device_id: str) -> None:
        self._to_release.add(device_id)
        self._wake.set()

    def _publish_record(self, device_id: str, record: bytes) -> None:
        if self._port is not None:
            self._port.publish(f"{self.prefix}/$cluster/devices/{device_id}", record, retain=True)

    def _heartbeat(self) -> None:
        if self._port is not None:
            self.membership.beat(self._port)

    def _store_down(self, exc: LeaseStoreDown) -> None:
        now = self._clock()
        if now - self._outage_logged >= OUTAGE_LOG_S:
            self._outage_logged = now
            log.warning("cluster %s: PostgreSQL unreachable for the device leases (%s); devices whose "
                        "lease runs out are not answered until it is back", self.me, exc)

    async def run(self, connected: asyncio.Event) -> None:
        """The timer: heartbeats, member expiry, claims, renewals, releases. Until cancelled."""
        now = self._clock()
        next_beat, next_renew = now, now + self.ttl_s / 3
        while True:
            now = self._clock()
            if connected.is_set() and now >= next_beat:
                self._heartbeat()
                next_beat = now + self.membership.heartbeat_s
            for _gone in self.membership.expired():
                self._recompute()
            for device_id, lease in list(self.held.items()):
                if lease.valid_until <= now:
                    del self.held[device_id]
                    log.warning("cluster %s: lease on %s not renewed in time: its session ends", self.me, device_id)
                    self.own_records.session_ended(device_id, lease.epoch)
                    self._hand_over(device_id, "its lease was not renewed in time")
            try:
                await self._release()
                sessions = self.roaming.sessions
                if not self._leaving and now >= next_renew and (connected.is_set() or sessions):
                    next_renew = now + self.ttl_s / 3  # off the broker: only the sessions' leases
                    await self._renew(sorted(self.held) if connected.is_set() else sorted(sessions))
                if connected.is_set() and not self._leaving:
                    await self._claim()
            except LeaseStoreDown as exc:
                self._store_down(exc)
            self._wake.clear()
            try:
                async with asyncio.timeout(TICK_S):
                    await self._wake.wait()
            except TimeoutError:
                pass

    async def _release(self) -> None:
        if self._to_release:
            devices = sorted(self._to_release - set(self.held))
            self._to_release.clear()
            await self.leases.release(devices)

    async def _renew(self, devices: list[str]) -> None:
        started = self._clock()
        renewed = await self.leases.renew(devices)
        for device_id in devices:
            if (lease := self.held.get(device_id)) is None:
                continue  # ended while the renewal ran
            if renewed.get(device_id) == lease.epoch:
                lease.valid_until = self.held.deadline(started)
            elif self.held.get(device_id) is lease and device_id not in renewed:
                del self.held[device_id]
                log.warning("cluster %s: lost the lease on %s: its session ends", self.me, device_id)
                self.own_records.session_ended(device_id, lease.epoch)
                self._hand_over(device_id, "its lease was lost")

    async def _claim(self) -> None:
        now = self._clock()
        wanted = sorted(d for d in self.owned
                        if d not in self.held and now - self._tried.get(d, -CLAIM_RETRY_S) >= CLAIM_RETRY_S)
        if not wanted:
            return
        started = self._clock()
        granted = await self.leases.claim(wanted)
        if self._leaving:  # leave() releases them all
            return
        for device_id in wanted:
            epoch = granted.get(device_id)
            if epoch is None:
                self._tried[device_id] = started
                continue
            if device_id not in self.owned:  # moved away while the claim ran
                self._to_release.add(device_id)
                continue
            self._tried.pop(device_id, None)
            self.held.grant(device_id, epoch, started)
            self._claimed += 1
            log.info("cluster %s: took the lease on %s (epoch %d)", self.me, device_id, epoch)
            if self._port is not None:
                self.own_records.publish(Served(self.me, epoch, time.time()), device_id)
                self._port.take_over(device_id, epoch)

    async def share_events(self, bus: EventBus) -> None:
        """This member's turn events to the other members' screens and consoles (QoS 0), theirs onto `bus`."""
        self._bus = bus
        sub = bus.subscribe(*SHARED_EVENTS, name="cluster-events")
        try:
            async for event in sub:
                out = self.events.outgoing(event)  # always: it keeps each device's reply state
                if out is not None and self._port is not None:
                    self._port.publish(*out, qos=0)
        finally:
            sub.close()
            self._bus = None

    async def leave(self) -> None:
        """A clean stop: the member record deleted and every lease released at once."""
        self._leaving = True  # the timer (still running meanwhile) claims nothing more
        self.roaming.leave()  # takes nothing more; its sessions find no lease for their next downlink
        if self._port is not None:
            self.membership.leave(self._port)
        held = sorted(self.held)
        self.held.clear()
        try:  # every lease of this member, including one a claim in flight has just taken
            await self.leases.release_all()
        except LeaseStoreDown as exc:
            log.warning("cluster %s: could not release %d leases (%s): they run out within %.0f s",
                        self.me, len(held), exc, self.ttl_s)
        else:
            log.info("cluster %s: left the cluster, %d leases released", self.me, len(held))
        await self.leases.close()
