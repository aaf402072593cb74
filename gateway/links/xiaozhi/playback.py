"""How much reply audio sits in a xiaozhi box's decode queue, as arithmetic on an injected clock.

The firmware queues at most 2.4 s of incoming Opus (MAX_DECODE_PACKETS_IN_QUEUE) and drops what
does not fit. The gateway's Speaker already paces a reply (a prebuffer, then real time), but a
slow sentence followed by a fast one would let it send a burst; this keeps the box's queue under
`max_ahead_ms` whatever the sender does, by waiting before a frame that would overfill it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class BoxPlayback:
    max_ahead_ms: float
    ends_at: float | None = None  # clock time (s) at which the box has played all it was sent

    def queued_ms(self, now: float) -> float:
        return 0.0 if self.ends_at is None else max(0.0, (self.ends_at - now) * 1000)

    def wait_before(self, frame_ms: float, now: float) -> float:
        """Seconds to wait before sending a frame of `frame_ms`; call `sent()` after sending."""
        return max(0.0, (self.queued_ms(now) + frame_ms - self.max_ahead_ms) / 1000)

    def sent(self, frame_ms: float, now: float) -> None:
        start = now if self.ends_at is None else max(now, self.ends_at)
        self.ends_at = start + frame_ms / 1000

    def clear(self) -> None:
        """The box dropped its queue (abort)."""
        self.ends_at = None
