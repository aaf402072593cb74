"""How many new boxes one address may register through the OTA endpoint (open enrolment).

A token bucket per source address: `per_hour` registrations at once, refilled at `per_hour` an
hour. A registered box asking again (at every boot) takes nothing; only a request that creates a
device does. The OTA service takes a slot before it asks the registry and gives it back when the
request created nothing (the box was registered already, or it was refused), so requests from one
address that arrive together cannot overrun the bucket. The state of at most `MAX_ADDRESSES`
addresses is kept (the least recently used are forgotten); the registry's own cap
(`xiaozhi.max_enrolled_boxes`) bounds what many addresses together can create.
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

MAX_ADDRESSES = 4096


@dataclass
class _Bucket:
    slots: float
    at: float


class NewBoxLimit:
    def __init__(self, per_hour: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.per_hour = per_hour
        self._clock = clock
        self._buckets: OrderedDict[str, _Bucket] = OrderedDict()

    def _bucket(self, address: str) -> _Bucket:
        now = self._clock()
        bucket = self._buckets.pop(address, None) or _Bucket(float(self.per_hour), now)
        bucket.slots = min(float(self.per_hour), bucket.slots + (now - bucket.at) * self.per_hour / 3600)
        bucket.at = now
        self._buckets[address] = bucket  # the most recently used last
        while len(self._buckets) > MAX_ADDRESSES:
            self._buckets.popitem(last=False)
        return bucket

    def take(self, address: str) -> bool:
        """Take a registration slot of `address`; False when it has none left."""
        bucket = self._bucket(address)
        if bucket.slots < 1:
            return False
        bucket.slots -= 1
        return True

    def give_back(self, address: str) -> None:
        """Return a slot `take` gave (the request registered nothing)."""
        bucket = self._bucket(address)
        bucket.slots = min(float(self.per_hour), bucket.slots + 1)

    def retry_after_s(self, address: str) -> int:
        """Seconds until `address` has a slot again (0: now)."""
        bucket = self._bucket(address)
        if bucket.slots >= 1 or self.per_hour <= 0:
            return 0
        return max(1, math.ceil((1 - bucket.slots) * 3600 / self.per_hour - 1e-6))
