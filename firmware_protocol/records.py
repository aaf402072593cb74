"""Field kinds for compact lists and signed numbers (used by the expression messages).

`records`: a u8 count of fixed-size records of unsigned fields (a C decoder uses a plain struct
array); `i8`/`i16`: signed two's-complement integers. See fields.py for the other kinds.
"""

from __future__ import annotations

from typing import Any

from .errors import malformed
from .fields import FieldSpec, Reader, UInt, _is_int


class SInt(FieldSpec):
    """Signed big-endian two's-complement integer of 8 or 16 bits."""

    def __init__(self, bits: int) -> None:
        self.bits = bits
        self.size = bits // 8
        self.kind = f"i{bits}"

    def check(self, label: str, value: Any) -> Any:
        low, high = -(1 << (self.bits - 1)), (1 << (self.bits - 1)) - 1
        if not _is_int(value) or not low <= value <= high:
            raise malformed(f"{label} must be an int in {low}..{high}, got {value!r}")
        return int(value)

    def write(self, value: Any, out: bytearray) -> None:
        out += int(value).to_bytes(self.size, "big", signed=True)

    def read(self, reader: Reader, label: str) -> Any:
        return int.from_bytes(reader.take(self.size, label), "big", signed=True)

    def read_checked(self, reader: Reader, label: str) -> Any:
        return self.read(reader, label)  # `size` bytes of two's complement are always in range


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


I8 = SInt(8)
