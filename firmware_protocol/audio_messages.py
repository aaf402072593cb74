"""The audio stream messages: AudioStart, AudioChunk, AudioStop (type codes 0x10-0x12)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from .field_spec import wire
from .format_field import AUDIO_FORMAT
from .int_fields import U16, U32, Enum8
from .text_fields import BYTES_REST
from .message import Message
from .values import AudioFormat, StopReason


@dataclass(frozen=True)
class AudioStart(Message):
    """Both directions: an audio stream begins."""

    TYPE: ClassVar[int] = 0x10
    NAME: ClassVar[str] = "audio_start"
    stream_id: int = wire(U16)
    format: AudioFormat = wire(AUDIO_FORMAT, AudioFormat())


@dataclass(frozen=True)
class AudioChunk(Message):
    """Both directions: PCM s16le samples or one Opus packet of a stream."""

    TYPE: ClassVar[int] = 0x11
    NAME: ClassVar[str] = "audio_chunk"
    stream_id: int = wire(U16)
    seq: int = wire(U32)
    data: bytes = wire(BYTES_REST)


@dataclass(frozen=True)
class AudioStop(Message):
    """Both directions: an audio stream ends."""

    TYPE: ClassVar[int] = 0x12
    NAME: ClassVar[str] = "audio_stop"
    stream_id: int = wire(U16)
    reason: StopReason = wire(Enum8(StopReason), StopReason.END)
