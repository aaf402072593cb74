"""Bus events the memory publishes (frozen dataclasses; see gateway/bus.py)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Alert:
    """A rule fired: say `text` on the user's voice boxes and show it on the screens.

    `devices` are the user's devices from memory.users (empty: every connected device); it is
    spoken only on those connected that announced AUDIO_OUT (gateway/memory/alerts.py). Voice
    sessions and the screen hub subscribe to this event; the memory also keeps it as an
    observation (`kind:event`, `source:rules`, `alert:<rule id>`).
    """

    user_id: str
    devices: tuple[str, ...]
    text: str
    rule_id: int
    severity: str  # "warning" (a threshold crossed) | "reminder" (something missing by a time)
    at: float  # unix seconds
