"""The sensor reading messages: SensorReading and its ReadingAck (type codes 0x40-0x41)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from .field_spec import wire
from .int_fields import U32, Enum8
from .text_fields import STR, Str
from .values_field import VALUES
from .message import Message
from .values import ReadingStatus

READING_KIND_PATTERN = r"[a-z][a-z0-9_]{0,31}"


@dataclass(frozen=True)
class SensorReading(Message):
    """Device -> gateway: one measurement (e.g. blood pressure), answered by a ReadingAck.

    seq numbers a device's readings (the device keeps it across reconnects); the gateway stores
    each device + seq once. measured_at is the device's clock in Unix seconds (0 = unknown).
    """

    TYPE: ClassVar[int] = 0x40
    NAME: ClassVar[str] = "sensor_reading"
    seq: int = wire(U32)
    kind: str = wire(Str(READING_KIND_PATTERN, "1..32 chars of [a-z0-9_], starting with a letter"))
    measured_at: int = wire(U32, 0)
    values: tuple[tuple[str, str, float], ...] = wire(VALUES, ())


@dataclass(frozen=True)
class ReadingAck(Message):
    """Gateway -> device: the fate of SensorReading `seq`; STORED and DUPLICATE mean it is safe."""

    TYPE: ClassVar[int] = 0x41
    NAME: ClassVar[str] = "reading_ack"
    seq: int = wire(U32)
    status: ReadingStatus = wire(Enum8(ReadingStatus), ReadingStatus.STORED)
    code: str = wire(STR, "")
    text: str = wire(STR, "")
