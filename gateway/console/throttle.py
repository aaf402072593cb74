"""Failed console logins, per peer address: after `max_failures` in a row the peer waits 60 s,
doubled at each further failure (at most an hour); a success forgets the peer."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

BASE_S = 60.0
MAX_S = 3600.0
MAX_PEERS = 1024  # bounded: the oldest entry goes first


@dataclass
class _Peer:
    failures: int = 0
    locked_until: float = 0.0


class LoginThrottle:
    def __init__(self, max_failures: int, clock: Callable[[], float] = time.monotonic) -> None:
        self._max = max_failures
        self._clock = clock
        self._peers: dict[str, _Peer] = {}

    def retry_after(self, peer: str) -> float:
        """Seconds the peer must still wait before another try (0: it may try now)."""
        entry = self._peers.get(peer)
        return max(0.0, entry.locked_until - self._clock()) if entry else 0.0

    def failed(self, peer: str) -> float:
        """Count a wrong password; returns the wait it now has (0 while under the limit)."""
        entry = self._peers.pop(peer, None) or _Peer()
        self._peers[peer] = entry  # most recent last
        while len(self._peers) > MAX_PEERS:
            del self._peers[next(iter(self._peers))]
        entry.failures += 1
        over = entry.failures - self._max
        if over >= 0:
            entry.locked_until = self._clock() + min(MAX_S, BASE_S * 2**over)
        return self.retry_after(peer)

    def succeeded(self, peer: str) -> None:
        self._peers.pop(peer, None)
