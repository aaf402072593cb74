"""Text and byte field kinds: a length-prefixed UTF-8 str, and the rest of the message's bytes."""

from __future__ import annotations

import re
from typing import Any

from .errors import malformed
from .field_spec import FieldSpec
from .reader import Reader

MAX_STR_BYTES = 0xFFFF


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


STR = Str()
BYTES_REST = BytesRest()
