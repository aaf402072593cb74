"""Sensor readings become observations in the memory of the device's user.

Consumes the bus event published after a reading is durably stored (`ReadingStored` of
gateway/devices/readings.py: reading_id, device_id, kind, values, units, measured_at). Each one
becomes an observation tagged `kind:event`, `reading:<kind>`, `source:<device>`,
`date:<YYYY-MM-DD>` and a `domain:` (homecare for health readings, else home), with a sentence
that reads well when spoken ("blood pressure 158 over 95 mmHg, pulse 72 bpm").
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable
from datetime import datetime
from typing import Any, Protocol

from gateway.memory.errors import MemoryError_
from gateway.memory.service import MemoryService
from gateway.memory.store import Node

log = logging.getLogger(__name__)

HEALTH_KINDS = frozenset({"blood_pressure", "heart_rate", "pulse", "spo2", "glucose", "weight", "body_temperature",
                          "temperature_body", "steps", "sleep"})


class ReadingEvent(Protocol):
    reading_id: int
    device_id: str
    kind: str
    values: dict[str, float]
    units: dict[str, str]
    measured_at: datetime


def _num(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else f"{v:.1f}"


def describe_reading(kind: str, values: dict[str, float], units: dict[str, str]) -> str:
    """'blood pressure 158 over 95 mmHg, pulse 72 bpm' / 'temperature 21.5 °C'."""
    values = dict(values)
    parts = []
    if "systolic" in values and "diastolic" in values:
        unit = units.get("systolic", "")
        parts.append(f"{kind.replace('_', ' ')} {_num(values.pop('systolic'))} over {_num(values.pop('diastolic'))} {unit}".strip())
    for name, value in values.items():
        label = kind.replace("_", " ") if name in ("value", kind) else name.replace("_", " ")
        parts.append(f"{label} {_num(value)} {units.get(name, '')}".strip())
    return ", ".join(parts) or kind.replace("_", " ")


async def remember_reading(memory: MemoryService, event: ReadingEvent) -> Node:
    when = event.measured_at.astimezone()
    text = describe_reading(event.kind, event.values, event.units)
    content = f"{text}, measured {when:%Y-%m-%d %H:%M} by {event.device_id}"
    domain = "homecare" if event.kind in HEALTH_KINDS else "home"
    return await memory.remember(
        memory.user_for(event.device_id), content, kind="event", source=event.device_id, when=when,
        extra_tags=[f"domain:{domain}", f"reading:{event.kind}", f"date:{when:%Y-%m-%d}"])


async def consume_readings(memory: MemoryService, subscription: Any,
                           on_remembered: Callable[[Node], Any] | None = None) -> None:
    """Forever: each reading event on the bus -> one observation, then `on_remembered(node)`
    (may be async: the gateway publishes the node and evaluates the rules). A bad event is
    logged and skipped; the next ones are still remembered."""
    async for event in subscription:
        try:
            node = await remember_reading(memory, event)
            log.info("memory: reading %s from %s remembered as node %d", event.kind, event.device_id, node.id)
            if on_remembered is not None and inspect.isawaitable(result := on_remembered(node)):
                await result
        except MemoryError_ as exc:
            log.warning("memory: reading %r from %s not remembered: %s: %s",
                        getattr(event, "kind", "?"), getattr(event, "device_id", "?"), exc.code, exc.text)
