"""The values field kind: a SensorReading's named measurements."""

from __future__ import annotations

import math
import re
import struct
from typing import Any

from .errors import malformed
from .field_spec import FieldSpec
from .reader import Reader
from .text_fields import STR

_F32 = struct.Struct(">f")


class Values(FieldSpec):
    """Named measurements: u8 count, then per value: str name, str unit, f32 value (IEEE 754,
    big-endian). Names are unique; NaN and infinities are a `malformed-message`. In Python a tuple
    of (name, unit, value) tuples; JSON: a list of {"name", "unit", "value"} objects.
    """

    kind = "values"
    MAX_COUNT = 32
    NAME = re.compile(r"[a-z][a-z0-9_]{0,31}")

    def check(self, label: str, value: Any) -> Any:
        if not isinstance(value, (tuple, list)) or len(value) > self.MAX_COUNT:
            raise malformed(f"{label} must be a list of at most {self.MAX_COUNT} (name, unit, value)")
        out, seen = [], set()
        for item in value:
            if not isinstance(item, (tuple, list)) or len(item) != 3:
                raise malformed(f"{label}: each value is a (name, unit, value) triple, got {item!r}")
            name, unit, number = item
            if not isinstance(name, str) or not self.NAME.fullmatch(name) or name in seen:
                raise malformed(f"{label}: value names are unique [a-z][a-z0-9_]{{0,31}}, got {name!r}")
            STR.check(f"{label}.{name}.unit", unit)
            if not isinstance(number, (int, float)) or isinstance(number, bool) or not math.isfinite(number):
                raise malformed(f"{label}.{name} must be a finite number, got {number!r}")
            try:  # normalised to the nearest f32, so what is checked is what goes on the wire
                f32 = _F32.unpack(_F32.pack(number))[0]
            except OverflowError:
                raise malformed(f"{label}.{name} = {number!r} does not fit a 32-bit float") from None
            seen.add(name)
            out.append((name, unit, f32))
        return tuple(out)

    def write(self, value: Any, out: bytearray) -> None:
        out.append(len(value))
        for name, unit, number in value:
            STR.write(name, out)
            STR.write(unit, out)
            out += _F32.pack(number)

    def read(self, reader: Reader, label: str) -> Any:
        count = reader.take(1, label)[0]
        items = []
        for i in range(count):
            name = STR.read(reader, f"{label}[{i}].name")
            unit = STR.read(reader, f"{label}[{i}].unit")
            items.append((name, unit, _F32.unpack(reader.take(4, f"{label}[{i}].value"))[0]))
        return items  # checked by the message's __post_init__, like every field

    def read_checked(self, reader: Reader, label: str) -> Any:
        """`check`'s tests that values from the wire can fail, in its order: read units are
        text of at most MAX_STR_BYTES, read numbers are f32 already."""
        items = self.read(reader, label)
        if len(items) > self.MAX_COUNT:
            raise malformed(f"{label} must be a list of at most {self.MAX_COUNT} (name, unit, value)")
        seen = set()
        for name, _, number in items:
            if not self.NAME.fullmatch(name) or name in seen:
                raise malformed(f"{label}: value names are unique [a-z][a-z0-9_]{{0,31}}, got {name!r}")
            if not math.isfinite(number):
                raise malformed(f"{label}.{name} must be a finite number, got {number!r}")
            seen.add(name)
        return tuple(items)

    def to_json(self, value: Any) -> Any:
        return [{"name": n, "unit": u, "value": v} for n, u, v in value]

    def from_json(self, label: str, obj: Any) -> Any:
        if not isinstance(obj, list) or not all(isinstance(o, dict) and set(o) == {"name", "unit", "value"} for o in obj):
            raise malformed(f"{label} must be a list of objects with keys name, unit, value")
        return [(o["name"], o["unit"], o["value"]) for o in obj]


VALUES = Values()
