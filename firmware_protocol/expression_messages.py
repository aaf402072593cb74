"""The expression messages of a spoken sentence: Visemes, Mouth, Action, Sentiment, ServoKeyframes,
and the device's ExpressionSetup (type codes 0x30-0x35)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from .field_spec import wire
from .int_fields import I8, U8, U16, U32, Enum8
from .message import Message
from .records import Records
from .text_fields import BYTES_REST, STR
from .values import Viseme


@dataclass(frozen=True)
class Visemes(Message):
    """Gateway -> device (VISEMES): the lip-sync track of the sentence of audio stream `stream_id`.

    Sent after its ReplyText and before its AudioStart. Times are ms from the stream's first
    sample; open is the mouth opening 0 (closed)..255 (fully open). A track longer than 255 runs
    comes as several Visemes messages with the same stream_id, to be appended.
    """

    TYPE: ClassVar[int] = 0x30
    NAME: ClassVar[str] = "visemes"
    stream_id: int = wire(U16)
    visemes: tuple[tuple[int, int, int, int], ...] = wire(
        Records(("viseme", Enum8(Viseme)), ("start_ms", U16), ("duration_ms", U16), ("open", U8)), ())


@dataclass(frozen=True)
class Mouth(Message):
    """Gateway -> device (MOUTH): mouth opening of stream `stream_id`, one byte per frame.

    Byte i (0 closed..255 open) holds from i * frame_ms to (i + 1) * frame_ms after the stream's
    first sample. Sent after its ReplyText and before its AudioStart.
    """

    TYPE: ClassVar[int] = 0x31
    NAME: ClassVar[str] = "mouth"
    stream_id: int = wire(U16)
    frame_ms: int = wire(U8, 40)
    values: bytes = wire(BYTES_REST, b"")


@dataclass(frozen=True)
class Action(Message):
    """Gateway -> device (ACTION): what the sentence of stream `stream_id` expresses (Fay's Action)."""

    TYPE: ClassVar[int] = 0x32
    NAME: ClassVar[str] = "action"
    stream_id: int = wire(U16)
    code: str = wire(STR)
    behavior: str = wire(STR, "")
    affect: str = wire(STR, "")
    intensity: int = wire(U8, 50)  # percent 0..100
    priority: int = wire(U8, 50)


@dataclass(frozen=True)
class Sentiment(Message):
    """Gateway -> device (ACTION): the mood of the sentence of stream `stream_id`, -20..20 tenths."""

    TYPE: ClassVar[int] = 0x33
    NAME: ClassVar[str] = "sentiment"
    stream_id: int = wire(U16)
    tenths: int = wire(I8, 0)


@dataclass(frozen=True)
class ServoKeyframes(Message):
    """Gateway -> device (SERVO): the motion of the sentence of stream `stream_id`.

    Each keyframe: servo channel, target angle in degrees, time in ms from the stream's first
    sample at which the angle is reached. led_rgb is 0xRRGGBB (0 = unchanged), face a face name.
    """

    TYPE: ClassVar[int] = 0x34
    NAME: ClassVar[str] = "servo_keyframes"
    stream_id: int = wire(U16)
    keyframes: tuple[tuple[int, int, int], ...] = wire(
        Records(("channel", U8), ("angle", U8), ("time_ms", U16)), ())
    led_rgb: int = wire(U32, 0)
    face: str = wire(STR, "")


@dataclass(frozen=True)
class ExpressionSetup(Message):
    """Device -> gateway, optional, any time after Hello: how it wants its expression messages.

    mouth_frame_ms is the frame length of its Mouth messages (0 = the gateway's default).
    """

    TYPE: ClassVar[int] = 0x35
    NAME: ClassVar[str] = "expression_setup"
    mouth_frame_ms: int = wire(U8, 0)
