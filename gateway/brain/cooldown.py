"""A provider's cool-down (a circuit breaker): after a network failure it is skipped for a while.

A provider that got no first token in time, whose connection failed or was lost, or whose reply
stalled is most likely unreachable (a pulled network, a provider outage): asking it again on the
next turn would cost the user its whole `first_token_timeout_s` before the local answer. So it is
skipped for `cooldown_s` (brain.providers[].cooldown_s; 0 = never skipped) and the next provider or
the local brain answers at once. The first turn after the cool-down tries it again: if it is still
down that turn pays the timeout once more and the cool-down starts over.

HTTP errors (4xx/5xx) and garbage do not count: they come back at once, so retrying them costs the
user no waiting, and the next turn may well succeed (a rate limit, one bad response).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

log = logging.getLogger(__name__)


class Cooldown:
    def __init__(self, provider: str, seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.provider = provider
        self.seconds = seconds
        self._clock = clock
        self._until = 0.0  # skipped until then (clock time)
        self._down_since: float | None = None  # the first failure of the current outage

    def remaining(self) -> float:
        """Seconds until the provider is tried again (0: try it now)."""
        return max(0.0, self._until - self._clock())

    def failed(self, reason: str) -> None:
        """A network-type failure: skip the provider for `seconds` (logged once per cool-down)."""
        now = self._clock()
        if self.seconds <= 0 or self._until > now:  # off, or another turn found out first
            return
        self._until = now + self.seconds
        if self._down_since is None:
            self._down_since = now
            log.warning("brain: provider %s cooling down for %g s (%s): until then the next provider or the "
                        "local brain answers at once", self.provider, self.seconds, reason)
        else:
            log.info("brain: provider %s still down after %.0f s (%s): skipped for another %g s",
                     self.provider, now - self._down_since, reason, self.seconds)

    def answered(self) -> None:
        """The provider answered (its first token or tool call arrived): it is back, if it was down."""
        if self._down_since is not None:
            log.warning("brain: provider %s answers again (down for %.1f s)", self.provider,
                        self._clock() - self._down_since)
        self._down_since = None
        self._until = 0.0

    async def over(self) -> None:
        """Return when the cool-down has ended (tests, tools)."""
        while (left := self.remaining()) > 0:
            await asyncio.sleep(left)
