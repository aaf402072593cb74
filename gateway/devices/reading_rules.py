"""Plausibility rules for sensor readings (pure functions; the table is in PROTOCOL.md).

`check_reading` raises `ReadingInvalid` with a reason a person can act on; the reason travels
back to the device in `ReadingAck.text` and into the gateway log.
"""

from __future__ import annotations

from dataclasses import dataclass

from firmware_protocol import SensorReading

MAX_FUTURE_S = 24 * 3600
GENERIC_MAX_MAGNITUDE = 1e9


class ReadingInvalid(ValueError):
    """A reading that is well-formed on the wire but not plausible."""


@dataclass(frozen=True)
class Rule:
    units: tuple[str, ...]
    low: float
    high: float
    required: bool = True


RULES: dict[str, dict[str, Rule]] = {
    "blood_pressure": {
        "systolic": Rule(("mmHg",), 40, 300),
        "diastolic": Rule(("mmHg",), 20, 200),
        "pulse": Rule(("bpm",), 20, 250, required=False),
    },
    "temperature": {"celsius": Rule(("°C", "C"), -60, 150)},
    "humidity": {"percent": Rule(("%",), 0, 100)},
}


def _fmt(x: float) -> str:
    return f"{x:g}"


def check_reading(msg: SensorReading, now: float) -> None:
    """Raise ReadingInvalid when the reading is not plausible; `now` is Unix seconds."""
    if msg.measured_at and msg.measured_at > now + MAX_FUTURE_S:
        raise ReadingInvalid(f"measured_at {msg.measured_at} is more than a day in the future")
    values = {name: (unit, value) for name, unit, value in msg.values}
    rules = RULES.get(msg.kind)
    if rules is None:
        if not values:
            raise ReadingInvalid(f"a {msg.kind} reading needs at least one value")
        for name, (_, value) in values.items():
            if abs(value) > GENERIC_MAX_MAGNITUDE:
                raise ReadingInvalid(f"{name} {_fmt(value)} is beyond +-{GENERIC_MAX_MAGNITUDE:g}")
        return
    if not values.keys() <= rules.keys():  # (no set built for a reading with known values)
        unknown = sorted(values.keys() - rules.keys())
        raise ReadingInvalid(f"{msg.kind} has no value {', '.join(unknown)} (known: {', '.join(rules)})")
    for name, rule in rules.items():
        if name not in values:
            if rule.required:
                raise ReadingInvalid(f"{msg.kind} needs {name} ({rule.units[0]})")
            continue
        unit, value = values[name]
        if unit not in rule.units:
            raise ReadingInvalid(f"{name} must be in {' or '.join(rule.units)}, got {unit!r}")
        if not rule.low <= value <= rule.high:
            raise ReadingInvalid(f"{name} {_fmt(value)} {unit} is outside {_fmt(rule.low)}..{_fmt(rule.high)}")
    if msg.kind == "blood_pressure" and values["diastolic"][1] >= values["systolic"][1]:
        raise ReadingInvalid("diastolic must be below systolic")
