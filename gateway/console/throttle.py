"""Console logins, per peer address: after `max_failures` wrong passwords in a row the peer waits
60 s, doubled at each further failure (at most an hour); a success forgets the peer.

A password check (scrypt: 16 MB, ~50 ms of CPU) is reserved with `begin` before it runs and
given back with `end` when it has run: a check in flight counts against the peer's remaining
tries, so concurrent guesses cannot all slip past the limit before the first failure is counted
(after a lock-out, one try at a time). At most `per_peer` checks run at once for one address and
`total` for all; `begin` refuses the rest with how long to wait and why.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

BASE_S = 60.0
MAX_S = 3600.0
MAX_PEERS = 1024  # bounded: the oldest entry goes first
PER_PEER_CHECKS = 2  # password checks running at once for one address
TOTAL_CHECKS = 4  # ... and for all addresses (16 MB of scrypt memory each)


@dataclass
class _Peer:
    failures: int = 0
    locked_until: float = 0.0
    checking: int = 0  # password checks of this peer running now


@dataclass(frozen=True)
class Refusal:
    status: int  # 429: this peer must wait; 503: the gateway is busy checking others' passwords
    wait_s: float
    why: str  # for the log and the answer


class LoginThrottle:
    def __init__(self, max_failures: int, clock: Callable[[], float] = time.monotonic,
                 per_peer: int = PER_PEER_CHECKS, total: int = TOTAL_CHECKS) -> None:
        self._max = max_failures
        self._clock = clock
        self._per_peer, self._total = per_peer, total
        self._peers: dict[str, _Peer] = {}
        self._checking = 0  # password checks running now, all peers

    def _entry(self, peer: str) -> _Peer:
        entry = self._peers.pop(peer, None) or _Peer()
        self._peers[peer] = entry  # most recent last
        while len(self._peers) > MAX_PEERS:
            del self._peers[next(iter(self._peers))]
        return entry

    def retry_after(self, peer: str) -> float:
        """Seconds the peer must still wait before another try (0: it may try now)."""
        entry = self._peers.get(peer)
        return max(0.0, entry.locked_until - self._clock()) if entry else 0.0

    def begin(self, peer: str) -> Refusal | None:
        """Reserve one password check for `peer`: None when reserved (then `end` it once it has
        run, and count its outcome with `failed` or `succeeded`), else why not now."""
        if (wait := self.retry_after(peer)) > 0:
            return Refusal(429, wait, "too many wrong passwords")
        entry = self._peers.get(peer) or _Peer()
        tries = max(1, self._max - entry.failures)  # before the lock-out; after one, a try at a time
        if entry.checking >= min(tries, self._per_peer):
            return Refusal(429, 1.0, f"{entry.checking} logins from this address are being checked already")
        if self._checking >= self._total:
            return Refusal(503, 1.0, f"{self._checking} logins are being checked already (the most at once)")
        self._entry(peer).checking += 1
        self._checking += 1
        return None

    def end(self, peer: str) -> None:
        """A check reserved by `begin` has run (or was abandoned and has stopped)."""
        self._checking = max(0, self._checking - 1)
        if (entry := self._peers.get(peer)) is not None:
            entry.checking = max(0, entry.checking - 1)

    def failed(self, peer: str) -> float:
        """Count a wrong password; returns the wait it now has (0 while under the limit)."""
        entry = self._entry(peer)
        entry.failures += 1
        over = entry.failures - self._max
        if over >= 0:
            entry.locked_until = self._clock() + min(MAX_S, BASE_S * 2**over)
        return self.retry_after(peer)

    def succeeded(self, peer: str) -> None:
        entry = self._peers.pop(peer, None)
        if entry is not None and entry.checking:  # its other checks in flight still hold their place
            self._peers[peer] = _Peer(checking=entry.checking)
