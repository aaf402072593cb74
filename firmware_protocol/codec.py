"""Message <-> bytes, and message <-> JSON-friendly dict (for vectors and logs)."""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

from .errors import ErrorCode, ProtocolError, malformed
from .message import Message, checked_fields, wire_fields
from .messages import MESSAGE_CLASSES, MESSAGE_NAMES, MESSAGE_TYPES, reserved_range
from .reader import Reader


def encode(msg: Message) -> bytes:
    """The bytes of one message: u8 type code, then each field in order."""
    cls = type(msg)
    if cls not in MESSAGE_CLASSES:
        raise TypeError(f"not a protocol message: {cls.__name__}")
    out = bytearray((msg.TYPE,))
    for name, spec in wire_fields(cls):
        spec.write(getattr(msg, name), out)
    return bytes(out)


def decode(data: bytes | bytearray | memoryview | str) -> Message:
    """Parse exactly one message; anything invalid raises `ProtocolError`.

    A `str` (e.g. a text WebSocket frame) is refused with `malformed-message`.
    """
    if isinstance(data, str):
        raise malformed("text is not a message (text WebSocket frames are refused)")
    data = bytes(data)
    if not data:
        raise malformed("empty message")
    cls = MESSAGE_TYPES.get(data[0])
    if cls is None:
        purpose = reserved_range(data[0])
        note = f" (reserved for {purpose})" if purpose else ""
        raise ProtocolError(
            ErrorCode.UNKNOWN_MESSAGE_TYPE, f"unknown message type 0x{data[0]:02x}{note}"
        )
    reader = Reader(data, 1)
    fields = checked_fields(cls)
    values = [spec.read_checked(reader, label) for _, spec, label in fields]
    if reader.remaining:
        raise malformed(f"{cls.__name__}: {reader.remaining} trailing bytes after the last field")
    if cls.__post_init__ is not Message.__post_init__:  # checks of its own: through __init__
        return cls(*values)  # (in wire order, which is the dataclass's field order)
    # Every field is checked already (read_checked): __init__ and __post_init__ would check again.
    msg = object.__new__(cls)
    msg.__dict__.update(zip(_names(cls), values))
    return msg


@functools.cache
def _names(cls: type[Message]) -> tuple[str, ...]:
    return tuple(name for name, _ in wire_fields(cls))


def to_dict(msg: Message) -> dict[str, Any]:
    """{"type": NAME, field: value, ...}; bytes as hex, AudioFormat as a nested dict."""
    if type(msg) not in MESSAGE_CLASSES:
        raise TypeError(f"not a protocol message: {type(msg).__name__}")
    out: dict[str, Any] = {"type": msg.NAME}
    for name, spec in wire_fields(type(msg)):
        out[name] = spec.to_json(getattr(msg, name))
    return out


def from_dict(d: Any) -> Message:
    """The inverse of `to_dict`; missing fields take their defaults, unknown keys are refused."""
    if not isinstance(d, dict):
        raise malformed(f"a message dict is needed, got {type(d).__name__}")
    name = d.get("type")
    cls = MESSAGE_NAMES.get(name) if isinstance(name, str) else None
    if cls is None:
        raise ProtocolError(ErrorCode.UNKNOWN_MESSAGE_TYPE, f"unknown message type {name!r}")
    specs = dict(wire_fields(cls))
    unknown = sorted(str(key) for key in d if key != "type" and key not in specs)
    if unknown:
        raise malformed(f"{cls.__name__}: unknown fields {unknown}")
    values = {
        key: specs[key].from_json(f"{cls.__name__}.{key}", value)
        for key, value in d.items()
        if key != "type"
    }
    missing = [f.name for f in dataclasses.fields(cls) if f.name not in values and _required(f)]
    if missing:
        raise malformed(f"{cls.__name__}: missing fields {missing}")
    return cls(**values)


def _required(f: dataclasses.Field[Any]) -> bool:
    return f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
