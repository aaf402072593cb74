"""A WebSocket or CoAP session's hold on its device's lease, in cluster mode.

Behind a load balancer or DNS a box whose connection dropped reconnects to whichever gateway it
is given (docs/SCALE-OUT.md "WebSocket, CoAP and serial devices"). Its session there takes the
device's lease at the Hello, once the device is authenticated and before the Welcome, from
whichever gateway held it: the box chose this one. The cluster node (gateway/cluster/node.py)
renews it with its other leases. `LeasedConnection` is the session's connection from then on:

- every downlink checks the lease first, the same local deadline the MQTT link's downlinks check
  (`DeviceLeases.lease`), and none goes out without it (LinkClosed ends the session);
- when the lease goes (another gateway took it, or it could not be renewed), the session stops
  speaking at once, logs why, and the connection is ended with the transport's own refusal
  (`Roaming.lease_lost`: WebSocket close code 4409, CoAP 4.01 `lease-lost`);
- when the session ends, the lease is released (unless a newer session of the device holds it).

Serial devices take no lease: a cable ends at one gateway. MQTT devices have theirs from the node
(placed by rendezvous hashing), not from their session.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Protocol

from firmware_protocol import Message, ProtocolError
from gateway.links.base import DeviceConnection, LinkClosed, Roaming

log = logging.getLogger(__name__)


class DeviceLeases(Protocol):
    """What a session needs of the cluster (gateway/cluster/roaming_leases.py RoamingLeases, the node's `.roaming`)."""

    async def take(self, device_id: str, on_lost: Callable[[str], None]) -> int | None:
        """The lease is this gateway's now: its epoch; `on_lost(why)` once if it goes. None: not taken."""
        ...

    def lease(self, device_id: str) -> int | None:
        """The epoch of this gateway's lease on the device while it is surely valid; else None."""
        ...

    def drop(self, device_id: str, epoch: int) -> None:
        """The session holding lease `epoch` ended: release it (unless a newer one holds it)."""
        ...


class LeasedConnection:
    """`conn` under the device's lease `epoch`: no downlink without it, ended when it goes."""

    def __init__(self, conn: DeviceConnection, leases: DeviceLeases, device_id: str, epoch: int, peer: str) -> None:
        self._conn = conn
        self.peer = peer
        self._leases = leases
        self.device_id = device_id
        self.epoch = epoch
        self.lost: str | None = None  # why the lease went
        self._ending: asyncio.Task[None] | None = None

    @classmethod
    async def take(cls, conn: DeviceConnection, leases: DeviceLeases, device_id: str,
                   peer: str) -> LeasedConnection | None:
        """The device's lease taken for this session; None when it could not be (logged by the node)."""
        holder: list[LeasedConnection] = []
        epoch = await leases.take(device_id, lambda why: holder[0].lease_lost(why))
        if epoch is None:
            return None
        holder.append(cls(conn, leases, device_id, epoch, peer))
        return holder[0]

    def lease_lost(self, why: str) -> None:
        """The node: the lease is gone. Silent from now on; the connection ends with the refusal."""
        if self.lost is not None:
            return
        self.lost = why
        log.warning("%s: lease-lost: %s; this session ends without another word to the device", self.peer, why)
        self._ending = asyncio.get_running_loop().create_task(self._refuse(why), name=f"lease-lost {self.peer}")

    async def _refuse(self, why: str) -> None:
        try:
            if isinstance(self._conn, Roaming):
                await self._conn.lease_lost(why)
            else:
                await self._conn.close(f"lease-lost: {why}")
        except Exception as exc:  # boundary: the peer may be gone already; nothing else to tell it
            log.info("%s: ending the connection after lease-lost failed (%s)", self.peer, exc)

    async def receive(self) -> Message | ProtocolError:
        if self.lost is not None:
            raise LinkClosed(f"lease-lost: {self.lost}")
        return await self._conn.receive()  # raises LinkClosed once lease_lost has ended the connection

    async def send(self, message: Message) -> None:
        if self.lost is not None or self._leases.lease(self.device_id) != self.epoch:
            raise LinkClosed(f"lease-lost: {self.lost or 'this gateway holds no valid lease on the device'}")
        await self._conn.send(message)

    async def close(self, reason: str = "") -> None:
        """The session's end: the lease released; the connection closed (after the refusal, if sent)."""
        self._leases.drop(self.device_id, self.epoch)
        if self._ending is not None:
            await self._ending
        else:
            await self._conn.close(reason)
