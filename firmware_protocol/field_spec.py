"""Field specs: how one dataclass field is checked, written, read and shown as JSON.

Each message class declares its fields with `wire(SPEC)`; the codec walks those specs, so
there is one encoder and one decoder for all messages. The kinds: int_fields.py (u8/u16/u32,
flags, enums, bool, i8/i16), text_fields.py (str, bytes_rest), format_field.py (AudioFormat),
values_field.py (a reading's values), records.py (lists of fixed-size records).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from .reader import Reader


class FieldSpec:
    """Base of all field specs. `kind` is the name used in PROTOCOL.md layout tables."""

    kind = "?"
    size: int | None = None  # fixed size in bytes, None when variable

    def check(self, label: str, value: Any) -> Any:
        """Validate a Python value and return it normalised (raise `ProtocolError`)."""
        raise NotImplementedError

    def write(self, value: Any, out: bytearray) -> None:
        raise NotImplementedError

    def read(self, reader: Reader, label: str) -> Any:
        raise NotImplementedError

    def read_checked(self, reader: Reader, label: str) -> Any:
        """`read`, then `check`: the value as a message holds it (`decode` builds messages from
        these). A spec whose read values can fail fewer checks skips the ones they always pass."""
        return self.check(label, self.read(reader, label))

    def to_json(self, value: Any) -> Any:
        return value

    def from_json(self, label: str, obj: Any) -> Any:
        return obj


def wire(spec: FieldSpec, default: Any = dataclasses.MISSING) -> Any:
    """Declare a message field with its wire spec (and optional default)."""
    return dataclasses.field(default=default, metadata={"wire": spec})
