"""Every message type of protocol v1: the lookups by type code and by name, and the reserved codes.

The message classes themselves are one frozen dataclass per type, by family: session_messages.py,
audio_messages.py, turn_messages.py, reading_messages.py, expression_messages.py (their base:
message.py).
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Mapping

from .audio_messages import AudioChunk, AudioStart, AudioStop
from .expression_messages import Action, ExpressionSetup, Mouth, Sentiment, ServoKeyframes, Visemes
from .text_fields import BytesRest
from .message import Message, wire_fields
from .reading_messages import ReadingAck, SensorReading
from .session_messages import Abort, Error, Hello, Ping, Pong, Welcome
from .turn_messages import ListenState, ReplyText, TextInput, Transcript, VadEvent

RESERVED_TYPE_RANGES: tuple[tuple[int, int, str], ...] = (
    (0x36, 0x3F, "expression: visemes, mouth-open, action, sentiment"),
    (0x42, 0x4F, "sensor readings and acks"),
    (0x50, 0x5F, "servo commands"),
    (0xF0, 0xFF, "vendor / experimental"),
)
"""Type codes kept for future messages; a v1 decoder rejects them as unknown."""


ALL_MESSAGES: tuple[type[Message], ...] = (
    Hello, Welcome, Ping, Pong, Error, Abort,
    AudioStart, AudioChunk, AudioStop,
    Transcript, ReplyText, TextInput, VadEvent, ListenState,
    SensorReading, ReadingAck,
    Visemes, Mouth, Action, Sentiment, ServoKeyframes, ExpressionSetup,
)  # fmt: skip


def reserved_range(code: int) -> str | None:
    """The purpose of a reserved type code, or None if the code is not reserved."""
    for low, high, purpose in RESERVED_TYPE_RANGES:
        if low <= code <= high:
            return purpose
    return None


def _build_registry(classes: tuple[type[Message], ...]) -> Mapping[int, type[Message]]:
    registry: dict[int, type[Message]] = {}
    names: set[str] = set()
    for cls in classes:
        if not 0 <= cls.TYPE <= 0xFF or cls.TYPE in registry or reserved_range(cls.TYPE):
            raise ValueError(f"{cls.__name__}: bad or duplicate type code 0x{cls.TYPE:02x}")
        if cls.NAME in names:
            raise ValueError(f"{cls.__name__}: duplicate name {cls.NAME!r}")
        specs = [spec for _, spec in wire_fields(cls)]
        if any(isinstance(spec, BytesRest) for spec in specs[:-1]):
            raise ValueError(f"{cls.__name__}: bytes_rest must be the last field")
        registry[cls.TYPE] = cls
        names.add(cls.NAME)
    return MappingProxyType(registry)


MESSAGE_TYPES: Mapping[int, type[Message]] = _build_registry(ALL_MESSAGES)
"""Type code -> message class (read-only)."""

MESSAGE_NAMES: Mapping[str, type[Message]] = MappingProxyType(
    {cls.NAME: cls for cls in ALL_MESSAGES}
)
"""Snake-case NAME -> message class (read-only)."""

MESSAGE_CLASSES: frozenset[type[Message]] = frozenset(ALL_MESSAGES)
"""Every message class (for a quick `type(msg) in MESSAGE_CLASSES`)."""
