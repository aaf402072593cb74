"""The MQTT topics and QoS of PROTOCOL.md ("MQTT"), shared by the gateway's link (mqtt.py) and the
device side (mqtt_device.py): `P/D/up`, `P/D/down`, `P/D/status`, with `P` the topic prefix and
`D` a device id."""

from __future__ import annotations

import re

from firmware_protocol import AudioChunk, Message, ReadingAck
from firmware_protocol.session_messages import DEVICE_ID_PATTERN

_DEVICE_ID = re.compile(DEVICE_ID_PATTERN)


def qos_for(message: Message) -> int:
    """Audio at QoS 0 (late audio is useless) and ReadingAck at QoS 0 (a device resends a reading
    until its ack comes, and the gateway answers a resend DUPLICATE, so a lost ack loses nothing and
    a QoS 1 flow for it would be a second acknowledgement: one packet less for both ends and the
    broker per reading); everything else at QoS 1."""
    return 0 if isinstance(message, (AudioChunk, ReadingAck)) else 1


def device_topic(topic: str, prefix: str) -> tuple[str, str] | None:
    """(device id, channel) of `P/D/channel`; None for any other topic. The device id is as
    written: check it with `valid_device_id`."""
    parts = topic.split("/")
    if len(parts) != 3 or parts[0] != prefix:
        return None
    return parts[1], parts[2]


def valid_device_id(device_id: str) -> bool:
    return _DEVICE_ID.fullmatch(device_id) is not None
