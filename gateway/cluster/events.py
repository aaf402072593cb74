"""Turn events across the cluster: a screen connected to any member follows every device.

Each member turns its own devices' turn events (the bus events its screens show: a sentence, a
transcript, a reply's end, a listen state; not an alert, which reaches every member's bus through
PostgreSQL, gateway/storage/alert_relay.py) into the screens' messages
(gateway/screens/hub.py `TurnMessages`) and publishes each to `P/$cluster/events/<device>` at
QoS 0 as `{"gateway": <member>, "message": {...}}`. Every member subscribes
`P/$cluster/events/+`; another member's message becomes a `RemoteScreenMessage` on its own bus,
which its screen hub fans out like its own (its own messages, heard back from the broker, are
dropped). The sentence's audio stays on the gateway that synthesised it: a forwarded sentence
carries the text, lips, mouth levels and action, and names that gateway (`Gateway`), but no
audio URL. QoS 0 and not retained: screens are a live view; what is published while the broker
is away is lost, and a screen that connects later sees the turns from then on.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

from gateway.screens.hub import RemoteScreenMessage, TurnMessages

log = logging.getLogger(__name__)

NO_DEVICE = "_"  # the topic level of an alert (it names people and maybe several devices)


class ClusterEvents:
    def __init__(self, me: str, prefix: str) -> None:
        self.me = me
        self.prefix = prefix
        self._turns = TurnMessages()
        self.sent = 0
        self.heard = 0

    @property
    def topic_filter(self) -> str:
        return f"{self.prefix}/$cluster/events/+"

    def outgoing(self, event: object) -> tuple[str, bytes] | None:
        """(topic, payload) of one of this member's turn events, None when screens show nothing of it."""
        message = self._turns.of(event)
        if message is None:
            return None
        data = message["Data"]
        if data.get("Key") == "alert":  # every member has it already, from PostgreSQL (storage/alert_relay.py)
            return None
        if data.get("Key") == "audio":  # the audio is this gateway's: screens of others show the rest
            data = {k: v for k, v in data.items() if k not in ("Value", "HttpValue")}
            message = {**message, "Data": {**data, "Gateway": self.me}}
        device = message.get("Username", "") if data.get("Key") != "alert" else NO_DEVICE
        self.sent += 1
        return (f"{self.prefix}/$cluster/events/{device or NO_DEVICE}",
                json.dumps({"gateway": self.me, "message": message}, ensure_ascii=False).encode())

    def incoming(self, topic_device: str, payload: bytes, publish: Callable[[Any], None]) -> None:
        """Another member's message: onto this gateway's bus (`publish`); its own and bad ones are not."""
        try:
            envelope = json.loads(payload)
            gateway, message = str(envelope["gateway"]), envelope["message"]
            if not isinstance(message, dict) or not isinstance(message.get("Data"), dict):
                raise ValueError("message is not a screens' message")
        except (ValueError, TypeError, KeyError) as exc:
            log.warning("cluster %s: ignored a turn event on events/%s: %s", self.me, topic_device, exc)
            return
        if gateway == self.me:
            return
        self.heard += 1
        publish(RemoteScreenMessage(gateway, message))
