"""Sensor readings become observations in the memory of the device's user.

A stored reading (`ReadingStored` of gateway/devices/readings.py: reading_id, device_id, kind,
values, units, measured_at; the feed reads them from the readings table, see reading_feed.py)
becomes an observation tagged `kind:event`, `reading:<kind>`, `source:<device>`,
`date:<YYYY-MM-DD>` and a `domain:` (homecare for health readings, else home), with a sentence
that reads well when spoken ("blood pressure 158 over 95 mmHg, pulse 72 bpm").

Its vector is the embedding of what the reading *is*, its gist without numbers and time
("blood pressure over mmHg, pulse bpm, from bp-1"): the same few texts for every reading of a
sensor, embedded once, which is what lets hundreds of readings per second into the memory on a
small machine (one MiniLM embedding of a whole reading sentence costs ~10 ms of a core). Search
by meaning finds readings by kind and device as before; the numbers are in the content.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime
from typing import Protocol

from gateway.memory.node_input import NodeSpec, node_input
from gateway.memory.service import MemoryService
from gateway.memory.nodes import Node

_NUMBER = re.compile(r"\s*(?<![\w.])[-+]?\d+(?:\.\d+)?\b")

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


def reading_gist(event: ReadingEvent) -> str:
    """What the reading is, without its numbers: 'blood pressure over mmHg, pulse bpm, from bp-1'."""
    text = _NUMBER.sub("", describe_reading(event.kind, event.values, event.units))
    return f"{text}, from {event.device_id}"


def reading_spec(user_for: Callable[[str], str], event: ReadingEvent, now: float) -> NodeSpec:
    """The observation a stored reading becomes (MemoryInputError for one that cannot be one)."""
    when = event.measured_at.astimezone()
    text = describe_reading(event.kind, event.values, event.units)
    content = f"{text}, measured {when:%Y-%m-%d %H:%M} by {event.device_id}"
    domain = "homecare" if event.kind in HEALTH_KINDS else "home"
    return node_input(user_for(event.device_id), content, now=now, kind="event", source=event.device_id, when=when,
                      extra_tags=[f"domain:{domain}", f"reading:{event.kind}", f"date:{when:%Y-%m-%d}"],
                      embed_text=reading_gist(event))


async def remember_reading(memory: MemoryService, event: ReadingEvent) -> Node:
    """One reading now (the feed writes them in batches, with its cursor)."""
    return (await memory.remember_many([reading_spec(memory.user_for, event, memory.clock())]))[0]
