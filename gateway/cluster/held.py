"""The device leases this member holds, each with the local deadline it is surely valid until.

A lease claimed, taken or renewed by a statement sent at `started` counts here until
`started + ttl` less a margin for the downlinks in flight when it runs out: PostgreSQL counts its
TTL from a moment after `started`, so this member stops answering the device before the database
could lease it to another. The cluster node (gateway/cluster/node.py) and the roaming sessions'
leases (gateway/cluster/roaming_leases.py) fill it; the links check `epoch` before each downlink.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass
class Lease:
    epoch: int
    valid_until: float  # monotonic: renewed before this or silent from then on


class HeldLeases(dict[str, Lease]):
    """device -> the lease this member holds on it."""

    def __init__(self, ttl_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.ttl_s = ttl_s
        self.margin_s = min(0.5, ttl_s / 6)  # downlinks in flight when a lease runs out
        self._clock = clock

    def deadline(self, started: float) -> float:
        """Until when a lease granted or renewed by a statement sent at `started` is surely valid."""
        return started + self.ttl_s - self.margin_s

    def grant(self, device_id: str, epoch: int, started: float) -> None:
        self[device_id] = Lease(epoch, self.deadline(started))

    def epoch(self, device_id: str) -> int | None:
        """The epoch of the lease on the device, while it is surely valid; else None."""
        lease = self.get(device_id)
        if lease is None or lease.valid_until <= self._clock():
            return None
        return lease.epoch
