"""The records field kind: a compact list of fixed-size records (used by the expression messages).

A u8 count of records of unsigned fields, so a C decoder uses a plain struct array. See
field_spec.py for the other kinds.
"""

from __future__ import annotations

from typing import Any

from .errors import malformed
from .field_spec import FieldSpec
from .int_fields import UInt
from .reader import Reader


class Records(FieldSpec):
    """A list of fixed-size records: u8 count, then each record's fields in order.

    Record fields are unsigned integers (`UInt` or `Enum8`), so a record has a fixed size and a C
    decoder can use a plain struct array. In Python a tuple of tuples of ints (enums for Enum8);
    JSON: a list of objects keyed by the record field names.
    """

    kind = "records"
    MAX_COUNT = 255

    def __init__(self, *fields: tuple[str, UInt]) -> None:
        self.fields = fields
        self.names = tuple(name for name, _ in fields)
        self.record_size = sum(spec.size or 0 for _, spec in fields)

    def check(self, label: str, value: Any) -> Any:
        if not isinstance(value, (tuple, list)) or len(value) > self.MAX_COUNT:
            raise malformed(f"{label} must be a list of at most {self.MAX_COUNT} records")
        out = []
        for i, item in enumerate(value):
            if not isinstance(item, (tuple, list)) or len(item) != len(self.fields):
                raise malformed(f"{label}[{i}] must be a ({', '.join(self.names)}) record, got {item!r}")
            out.append(tuple(spec.check(f"{label}[{i}].{name}", v) for (name, spec), v in zip(self.fields, item)))
        return tuple(out)

    def write(self, value: Any, out: bytearray) -> None:
        out.append(len(value))
        for item in value:
            for (_, spec), v in zip(self.fields, item):
                spec.write(v, out)

    def read(self, reader: Reader, label: str) -> Any:
        count = reader.take(1, label)[0]
        if count * self.record_size > reader.remaining:
            raise malformed(f"{label}: truncated, {count} records need {count * self.record_size} bytes, {reader.remaining} left")
        # checked by the message's __post_init__, like every field
        return [tuple(spec.read(reader, f"{label}[{i}].{name}") for name, spec in self.fields) for i in range(count)]

    def to_json(self, value: Any) -> Any:
        return [{name: spec.to_json(v) for (name, spec), v in zip(self.fields, item)} for item in value]

    def from_json(self, label: str, obj: Any) -> Any:
        if not isinstance(obj, list) or not all(isinstance(o, dict) and set(o) == set(self.names) for o in obj):
            raise malformed(f"{label} must be a list of objects with keys {', '.join(self.names)}")
        return [tuple(spec.from_json(f"{label}.{name}", o[name]) for name, spec in self.fields) for o in obj]
