"""Speaking alerts on the user's voice boxes (screens subscribe to the same `Alert` events)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from gateway.memory.events import Alert

log = logging.getLogger(__name__)


async def speak_alerts(subscription: Any, connected: Callable[[], list[str]],
                       say: Callable[[str, str], Awaitable[None]]) -> None:
    """Forever: each Alert is said on its devices that are connected (all connected devices when
    the alert names none). A device that cannot speak it is logged; the others still hear it."""
    async for alert in subscription:
        alert: Alert
        targets = [d for d in (alert.devices or tuple(connected())) if d in connected()]
        if not targets:
            log.warning("alert for %s not spoken: none of its devices is connected (%s)", alert.user_id, alert.text)
        for device in targets:
            try:
                await say(device, alert.text)
            except ValueError as exc:
                log.warning("alert for %s not spoken on %s: %s", alert.user_id, device, exc)
