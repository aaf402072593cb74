"""Real-time pacing of outgoing audio, as pure arithmetic on audio duration.

A device has a small playback buffer. We send `prebuffer_ms` of audio at once so playback
starts immediately and survives network jitter, then keep at most that much ahead of real
time. Sending no further ahead also bounds barge-in: on abort, at most the prebuffer is
still queued on the device, and the gateway stops within one chunk.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Pacer:
    prebuffer_ms: float
    start: float | None = None  # clock time of the first chunk (seconds)
    sent_ms: float = 0.0

    def delay_before(self, chunk_ms: float, now: float) -> float:
        """Seconds to wait before sending the next chunk of `chunk_ms`; call `sent()` after sending."""
        if self.start is None:
            self.start = now
        due = self.start + max(0.0, self.sent_ms - self.prebuffer_ms) / 1000.0
        return max(0.0, due - now)

    def sent(self, chunk_ms: float) -> None:
        self.sent_ms += chunk_ms
