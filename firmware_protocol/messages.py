"""The messages of protocol v1: one frozen dataclass per message type.

Each field is declared with `wire(SPEC)`; the field order is the byte order on the wire.
Constructing a message validates it, so an invalid message object cannot exist.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from types import MappingProxyType
from typing import ClassVar, Mapping

from .fields import (
    AUDIO_FORMAT,
    BOOL,
    BYTES_REST,
    STR,
    U8,
    U16,
    U32,
    VALUES,
    BytesRest,
    Enum8,
    FieldSpec,
    Flags,
    Str,
    wire,
)
from .records import I8, Records
from .values import (
    PROTOCOL_VERSION,
    AudioFormat,
    Capability,
    ReadingStatus,
    SpeechEvent,
    ListenStateKind,
    StopReason,
    Viseme,
)

DEVICE_ID_PATTERN = r"[A-Za-z0-9._:-]{1,64}"

RESERVED_TYPE_RANGES: tuple[tuple[int, int, str], ...] = (
    (0x36, 0x3F, "expression: visemes, mouth-open, action, sentiment"),
    (0x42, 0x4F, "sensor readings and acks"),
    (0x50, 0x5F, "servo commands"),
    (0xF0, 0xFF, "vendor / experimental"),
)
"""Type codes kept for future messages; a v1 decoder rejects them as unknown."""


class Message:
    """Base of every message. Subclasses are frozen dataclasses with TYPE and NAME."""

    TYPE: ClassVar[int]
    NAME: ClassVar[str]

    def __post_init__(self) -> None:
        for name, spec, label in checked_fields(type(self)):
            value = getattr(self, name)
            checked = spec.check(label, value)
            if checked is not value:  # normalised (an enum member, a tuple, an f32): stored as checked
                object.__setattr__(self, name, checked)


@functools.cache
def wire_fields(cls: type[Message]) -> tuple[tuple[str, FieldSpec], ...]:
    """The (name, spec) pairs of a message class, in wire order."""
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]
    return tuple((f.name, f.metadata["wire"]) for f in fields)


@functools.cache
def checked_fields(cls: type[Message]) -> tuple[tuple[str, FieldSpec, str], ...]:
    """(name, spec, label for errors) per field in wire order: the labels are made once per class."""
    return tuple((name, spec, f"{cls.__name__}.{name}") for name, spec in wire_fields(cls))


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


@dataclass(frozen=True)
class Transcript(Message):
    """Gateway -> device: what the gateway heard."""

    TYPE: ClassVar[int] = 0x20
    NAME: ClassVar[str] = "transcript"
    text: str = wire(STR)
    final: bool = wire(BOOL, True)


@dataclass(frozen=True)
class ReplyText(Message):
    """Gateway -> device: one spoken sentence, sent just before that sentence's audio."""

    TYPE: ClassVar[int] = 0x21
    NAME: ClassVar[str] = "reply_text"
    text: str = wire(STR)
    stream_id: int = wire(U16, 0)
    final: bool = wire(BOOL, False)


@dataclass(frozen=True)
class TextInput(Message):
    """Device -> gateway: a typed utterance (no audio)."""

    TYPE: ClassVar[int] = 0x22
    NAME: ClassVar[str] = "text_input"
    text: str = wire(STR)


@dataclass(frozen=True)
class VadEvent(Message):
    """Gateway -> device: speech started or ended in the device's audio (for a listening LED).

    audio_ms is the position in the device's input audio, in milliseconds since the session's
    first audio, at which the event was detected.
    """

    TYPE: ClassVar[int] = 0x23
    NAME: ClassVar[str] = "vad_event"
    SPEECH_START: ClassVar[SpeechEvent] = SpeechEvent.SPEECH_START
    SPEECH_END: ClassVar[SpeechEvent] = SpeechEvent.SPEECH_END
    event: SpeechEvent = wire(Enum8(SpeechEvent))
    audio_ms: int = wire(U32, 0)


@dataclass(frozen=True)
class ListenState(Message):
    """Gateway -> device (LISTEN): the gateway's listen state for this device changed (listen.mode).

    ASLEEP: a turn needs the wake word; LISTENING: the next utterance is a turn without it (a
    follow-up window after a reply); WOKEN: the wake word `word` (its model id, e.g. okay_nabu) was
    heard at audio_ms of the device's input audio, the question follows. For a LED, like VadEvent.
    """

    TYPE: ClassVar[int] = 0x24
    NAME: ClassVar[str] = "listen_state"
    ASLEEP: ClassVar[ListenStateKind] = ListenStateKind.ASLEEP
    LISTENING: ClassVar[ListenStateKind] = ListenStateKind.LISTENING
    WOKEN: ClassVar[ListenStateKind] = ListenStateKind.WOKEN
    state: ListenStateKind = wire(Enum8(ListenStateKind))
    word: str = wire(STR, "")
    audio_ms: int = wire(U32, 0)


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
