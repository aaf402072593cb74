"""The session messages: Hello / Welcome, Ping / Pong, Error and Abort (type codes 0x01-0x06)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from .field_spec import wire
from .format_field import AUDIO_FORMAT
from .int_fields import U8, U32, Flags
from .text_fields import STR, Str
from .message import Message
from .values import PROTOCOL_VERSION, AudioFormat, Capability

DEVICE_ID_PATTERN = r"[A-Za-z0-9._:-]{1,64}"


@dataclass(frozen=True)
class Hello(Message):
    """Device -> gateway, the first message of a session."""

    TYPE: ClassVar[int] = 0x01
    NAME: ClassVar[str] = "hello"
    device_id: str = wire(Str(DEVICE_ID_PATTERN, "1..64 chars of [A-Za-z0-9._:-]"))
    token: str = wire(STR, "")
    protocol_version: int = wire(U8, PROTOCOL_VERSION)
    capabilities: int = wire(Flags(Capability, 32), Capability.AUDIO_IN | Capability.AUDIO_OUT)
    audio_in: AudioFormat = wire(AUDIO_FORMAT, AudioFormat())
    audio_out: AudioFormat = wire(AUDIO_FORMAT, AudioFormat())
    firmware: str = wire(STR, "")


@dataclass(frozen=True)
class Welcome(Message):
    """Gateway -> device, the reply to Hello; audio_out is what the gateway will send."""

    TYPE: ClassVar[int] = 0x02
    NAME: ClassVar[str] = "welcome"
    session_id: str = wire(STR)
    protocol_version: int = wire(U8, PROTOCOL_VERSION)
    audio_out: AudioFormat = wire(AUDIO_FORMAT, AudioFormat())
    server: str = wire(STR, "")


@dataclass(frozen=True)
class Ping(Message):
    """Either direction; the peer answers with a Pong carrying the same nonce."""

    TYPE: ClassVar[int] = 0x03
    NAME: ClassVar[str] = "ping"
    nonce: int = wire(U32)


@dataclass(frozen=True)
class Pong(Message):
    """Either direction; the answer to a Ping."""

    TYPE: ClassVar[int] = 0x04
    NAME: ClassVar[str] = "pong"
    nonce: int = wire(U32)


@dataclass(frozen=True)
class Error(Message):
    """Either direction; `code` is a stable kebab-case string (see ErrorCode)."""

    TYPE: ClassVar[int] = 0x05
    NAME: ClassVar[str] = "error"
    code: str = wire(STR)
    text: str = wire(STR)


@dataclass(frozen=True)
class Abort(Message):
    """Device -> gateway: stop the current reply now (barge-in by button)."""

    TYPE: ClassVar[int] = 0x06
    NAME: ClassVar[str] = "abort"
    reason: str = wire(STR, "")
