"""Speaking alerts on the user's voice boxes (screens subscribe to the same `Alert` events)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from gateway.memory.events import Alert

log = logging.getLogger(__name__)


def _always(device_id: str) -> bool:
    return True


async def speak_alerts(subscription: Any, connected: Callable[[], list[str]],
                       say: Callable[[str, str], Awaitable[None]],
                       can_speak: Callable[[str], bool] = _always) -> None:
    """Forever: each Alert is said on those of its devices that are connected and announced audio
    output in their Hello (all such connected devices when the alert names none). A sensor or a
    screen-only device is skipped. When none can say it, that is logged; the alert itself is
    already in the user's memory (the rule engine wrote it before publishing). A device that
    fails to say it is logged; the others still hear it."""
    async for alert in subscription:
        alert: Alert
        online = connected()
        candidates = [d for d in (alert.devices or tuple(online)) if d in online]
        targets = [d for d in candidates if can_speak(d)]
        if not targets:
            silent = f"connected without audio output: {', '.join(candidates)}" if candidates else "none connected"
            log.warning("alert for %s not spoken: no device of theirs that can speak is connected (%s); "
                        "it stays in their memory: %s", alert.user_id, silent, alert.text)
        for device in targets:
            try:
                await say(device, alert.text)
            except ValueError as exc:
                log.warning("alert for %s not spoken on %s: %s", alert.user_id, device, exc)
