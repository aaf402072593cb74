"""Field specs: how one dataclass field is checked, written, read and shown as JSON.

Each message class declares its fields with `wire(SPEC)`; the codec walks those specs, so
there is one encoder and one decoder for all messages.
"""

from __future__ import annotations

import dataclasses
import math
import re
import struct
from enum import IntEnum, IntFlag
from typing import Any

from .errors import malformed
from .values import AudioFormat

MAX_STR_BYTES = 0xFFFF
_F32 = struct.Struct(">f")


class Reader:
    """A cursor over one message's bytes; running short is a `malformed-message`."""

    __slots__ = ("_data", "_pos")

    def __init__(self, data: bytes, pos: int = 0) -> None:
        self._data = data
        self._pos = pos

    @property
    def remaining(self) -> int:
        return len(self._data) - self._pos

    def take(self, size: int, label: str) -> bytes:
        pos = self._pos
        end = pos + size
        if end > len(self._data):
            raise malformed(f"{label}: truncated, needs {size} bytes, {self.remaining} left")
        self._pos = end
        return self._data[pos:end]

    def take_str(self, label: str) -> bytes:
        """The bytes of a str field: u16 big-endian length, then that many bytes."""
        data, pos = self._data, self._pos
        if pos + 2 > len(data):
            raise malformed(f"{label}: truncated, needs 2 bytes, {self.remaining} left")
        size = (data[pos] << 8) | data[pos + 1]
        end = pos + 2 + size
        if end > len(data):
            self._pos = pos + 2
            raise malformed(f"{label}: truncated, needs {size} bytes, {self.remaining} left")
        self._pos = end
        return data[pos + 2:end]

    def rest(self) -> bytes:
        chunk = self._data[self._pos :]
        self._pos = len(self._data)
        return chunk


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


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class UInt(FieldSpec):
    """Unsigned big-endian integer of 8, 16 or 32 bits."""

    def __init__(self, bits: int) -> None:
        self.bits = bits
        self.size = bits // 8
        self.kind = f"u{bits}"
        self._limit = 1 << bits

    def check(self, label: str, value: Any) -> Any:
        if type(value) is int and 0 <= value < self._limit:  # the common case, first
            return value
        if not _is_int(value) or not 0 <= value < self._limit:
            raise malformed(f"{label} must be an int in 0..{(1 << self.bits) - 1}, got {value!r}")
        return int(value)

    def write(self, value: Any, out: bytearray) -> None:
        out += int(value).to_bytes(self.size, "big")

    def read(self, reader: Reader, label: str) -> Any:
        return int.from_bytes(reader.take(self.size, label), "big")

    def read_checked(self, reader: Reader, label: str) -> Any:
        return self.read(reader, label)  # an int of `size` bytes is always in 0..2**bits-1


class Flags(UInt):
    """An unsigned integer holding an IntFlag; unknown bits are kept."""

    def __init__(self, flag_type: type[IntFlag], bits: int) -> None:
        super().__init__(bits)
        self.flag_type = flag_type

    read_checked = FieldSpec.read_checked  # an IntFlag, made by check

    def check(self, label: str, value: Any) -> Any:
        return self.flag_type(super().check(label, value))

    def to_json(self, value: Any) -> Any:
        return int(value)


class Enum8(UInt):
    """A u8 holding an IntEnum; values outside the enum are a `malformed-message`.

    JSON shows the lower-case member name; from_json accepts the name or the number.
    """

    def __init__(self, enum_type: type[IntEnum]) -> None:
        super().__init__(8)
        self.enum_type = enum_type
        self._members = {int(member): member for member in enum_type}

    read_checked = FieldSpec.read_checked  # a member of the enum, or malformed

    def check(self, label: str, value: Any) -> Any:
        number = super().check(label, value)
        member = self._members.get(number)
        if member is None:
            raise malformed(f"{label}: {number} is not a {self.enum_type.__name__}")
        return member

    def to_json(self, value: Any) -> Any:
        return self.enum_type(value).name.lower()

    def from_json(self, label: str, obj: Any) -> Any:
        if isinstance(obj, str):
            try:
                return self.enum_type[obj.upper()]
            except KeyError:
                raise malformed(f"{label}: unknown {self.enum_type.__name__} {obj!r}") from None
        return obj


class Bool(FieldSpec):
    """u8 0 (false) or 1 (true); any other byte is a `malformed-message`."""

    kind = "bool"
    size = 1

    def check(self, label: str, value: Any) -> Any:
        if not isinstance(value, bool):
            raise malformed(f"{label} must be a bool, got {value!r}")
        return value

    def write(self, value: Any, out: bytearray) -> None:
        out.append(1 if value else 0)

    def read(self, reader: Reader, label: str) -> Any:
        byte = reader.take(1, label)[0]
        if byte > 1:
            raise malformed(f"{label}: bool byte must be 0 or 1, got 0x{byte:02x}")
        return byte == 1


class Str(FieldSpec):
    """u16 byte length + UTF-8 bytes; optionally restricted to a regular expression."""

    kind = "str"

    def __init__(self, pattern: str | None = None, what: str = "") -> None:
        self.pattern = re.compile(pattern) if pattern else None
        self.what = what or (f"text matching {pattern}" if pattern else "text")

    def check(self, label: str, value: Any) -> Any:
        if not isinstance(value, str):
            raise malformed(f"{label} must be a str, got {type(value).__name__}")
        if value.isascii():  # one byte per character
            size = len(value)
        else:
            try:
                size = len(value.encode("utf-8"))
            except UnicodeEncodeError:
                raise malformed(f"{label} is not encodable as UTF-8") from None
        if size > MAX_STR_BYTES:
            raise malformed(f"{label} is {size} UTF-8 bytes, the maximum is {MAX_STR_BYTES}")
        if self.pattern is not None and not self.pattern.fullmatch(value):
            raise malformed(f"{label} must be {self.what}, got {value[:80]!r}")
        return value

    def write(self, value: Any, out: bytearray) -> None:
        raw = value.encode("utf-8")
        out += len(raw).to_bytes(2, "big")
        out += raw

    def read(self, reader: Reader, label: str) -> Any:
        raw = reader.take_str(label)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise malformed(f"{label}: invalid UTF-8 at byte {exc.start}") from None

    def read_checked(self, reader: Reader, label: str) -> Any:
        value = self.read(reader, label)  # valid UTF-8 of at most MAX_STR_BYTES (a u16 length)
        if self.pattern is not None and not self.pattern.fullmatch(value):
            raise malformed(f"{label} must be {self.what}, got {value[:80]!r}")
        return value


class BytesRest(FieldSpec):
    """All remaining bytes of the message; only allowed as the last field. JSON: hex."""

    kind = "bytes_rest"

    def check(self, label: str, value: Any) -> Any:
        if not isinstance(value, (bytes, bytearray, memoryview)):
            raise malformed(f"{label} must be bytes, got {type(value).__name__}")
        return bytes(value)

    def write(self, value: Any, out: bytearray) -> None:
        out += value

    def read(self, reader: Reader, label: str) -> Any:
        return reader.rest()

    def to_json(self, value: Any) -> Any:
        return value.hex()

    def from_json(self, label: str, obj: Any) -> Any:
        if not isinstance(obj, str):
            raise malformed(f"{label} must be a hex string, got {type(obj).__name__}")
        try:
            return bytes.fromhex(obj)
        except ValueError:
            raise malformed(f"{label} is not valid hex") from None


class Format(FieldSpec):
    """An embedded AudioFormat: u8 codec, u32 sample_rate, u8 channels (6 bytes)."""

    kind = "AudioFormat"
    size = 6
    _KEYS = frozenset(("codec", "sample_rate", "channels"))

    def check(self, label: str, value: Any) -> Any:
        if not isinstance(value, AudioFormat):
            raise malformed(f"{label} must be an AudioFormat, got {type(value).__name__}")
        return value

    def write(self, value: Any, out: bytearray) -> None:
        out.append(value.codec_code)
        out += value.sample_rate.to_bytes(4, "big")
        out.append(value.channels)

    def read(self, reader: Reader, label: str) -> Any:
        raw = reader.take(6, label)
        return AudioFormat.from_codec_code(raw[0], int.from_bytes(raw[1:5], "big"), raw[5])

    def to_json(self, value: Any) -> Any:
        return {"codec": value.codec, "sample_rate": value.sample_rate, "channels": value.channels}

    def from_json(self, label: str, obj: Any) -> Any:
        if not isinstance(obj, dict) or not set(obj) <= self._KEYS:
            raise malformed(f"{label} must be an object with keys {sorted(self._KEYS)}")
        return AudioFormat(**obj)


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


U8 = UInt(8)
U16 = UInt(16)
U32 = UInt(32)
BOOL = Bool()
STR = Str()
BYTES_REST = BytesRest()
AUDIO_FORMAT = Format()
VALUES = Values()


def wire(spec: FieldSpec, default: Any = dataclasses.MISSING) -> Any:
    """Declare a message field with its wire spec (and optional default)."""
    return dataclasses.field(default=default, metadata={"wire": spec})
