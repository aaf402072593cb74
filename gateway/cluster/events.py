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

The end of a turn (`TurnFinished`: its latency and the brain that answered, which screens do not
show) crosses for the other members' consoles as `{"gateway": <member>, "finished": {"device",
"latency_ms", "brain", "aborted", "reply"}}` on the same topic and becomes a `RemoteTurnFinished`
on their bus (the console's Talk page, gateway/console/talk_log.py).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gateway.screens.hub import TURN_EVENTS, RemoteScreenMessage, TurnMessages
from gateway.voice.events import TurnFinished

log = logging.getLogger(__name__)

NO_DEVICE = "_"  # the topic level of an alert (it names people and maybe several devices)
SHARED_EVENTS = (*TURN_EVENTS, TurnFinished)  # what a member publishes of its own devices


@dataclass(frozen=True)
class RemoteTurnFinished:
    """Bus event, cluster mode: the end of a turn another member served (its TurnFinished's metrics)."""

    gateway: str
    device_id: str
    latency_ms: float | None  # end of speech -> first reply audio; None: no audio played
    brain: str
    aborted: bool
    reply: str


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
        if isinstance(event, TurnFinished):
            return self._finished(event)
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

    def _finished(self, event: TurnFinished) -> tuple[str, bytes]:
        m = event.metrics
        finished = {"device": event.device_id, "brain": m.brain, "aborted": m.barged_in, "reply": m.reply,
                    "latency_ms": m.endpoint_to_first_audio_ms if m.endpoint_to_first_audio_ms > 0 else None}
        self.sent += 1
        return (f"{self.prefix}/$cluster/events/{event.device_id or NO_DEVICE}",
                json.dumps({"gateway": self.me, "finished": finished}, ensure_ascii=False).encode())

    def incoming(self, topic_device: str, payload: bytes, publish: Callable[[Any], None]) -> None:
        """Another member's message: onto this gateway's bus (`publish`); its own and bad ones are not."""
        try:
            envelope = json.loads(payload)
            gateway = str(envelope["gateway"])
            event = self._finished_event(gateway, envelope["finished"]) if "finished" in envelope else None
            if event is None:
                message = envelope["message"]
                if not isinstance(message, dict) or not isinstance(message.get("Data"), dict):
                    raise ValueError("message is not a screens' message")
                event = RemoteScreenMessage(gateway, message)
        except (ValueError, TypeError, KeyError) as exc:
            log.warning("cluster %s: ignored a turn event on events/%s: %s", self.me, topic_device, exc)
            return
        if gateway == self.me:
            return
        self.heard += 1
        publish(event)

    @staticmethod
    def _finished_event(gateway: str, f: object) -> RemoteTurnFinished:
        if not isinstance(f, dict) or not isinstance(f.get("device"), str) or not f["device"]:
            raise ValueError("finished: not {device, latency_ms, brain, aborted, reply}")
        latency = f.get("latency_ms")
        if latency is not None and (isinstance(latency, bool) or not isinstance(latency, (int, float))):
            raise ValueError(f"finished: latency_ms {latency!r} is not a number")
        return RemoteTurnFinished(gateway, f["device"], None if latency is None else float(latency),
                                  str(f.get("brain", "")), bool(f.get("aborted", False)), str(f.get("reply", "")))
