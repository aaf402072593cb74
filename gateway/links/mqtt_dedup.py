"""Drop QoS 1 redeliveries of publishes the MQTT link has already taken in.

A broker redelivers a QoS 1 publish with the DUP flag when it did not see our PUBACK (the
connection dropped in between). The gateway remembers a digest of the last `size` QoS 1
publishes; a DUP publish whose topic and payload it has seen is a redelivery and is dropped.
Readings are additionally deduplicated in the database by device + sequence number, which also
covers a gateway restart between delivery and PUBACK.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict


class RedeliveryFilter:
    def __init__(self, size: int = 1024) -> None:
        self.size = size
        self.dropped = 0
        self._seen: OrderedDict[bytes, None] = OrderedDict()

    def is_redelivery(self, topic: str, payload: bytes, qos: int, dup: bool) -> bool:
        if qos == 0:
            return False  # never redelivered
        key = hashlib.blake2b(topic.encode() + b"\0" + payload, digest_size=16).digest()
        if dup and key in self._seen:
            self.dropped += 1
            return True
        self._seen[key] = None
        self._seen.move_to_end(key)
        if len(self._seen) > self.size:
            self._seen.popitem(last=False)
        return False
