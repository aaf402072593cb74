"""Integer field kinds: u8/u16/u32, IntFlag bit sets, IntEnum bytes, bool, and signed i8/i16."""

from __future__ import annotations

from enum import IntEnum, IntFlag
from typing import Any

from .errors import malformed
from .field_spec import FieldSpec
from .reader import Reader


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


U8 = UInt(8)
U16 = UInt(16)
U32 = UInt(32)
BOOL = Bool()
I8 = SInt(8)
