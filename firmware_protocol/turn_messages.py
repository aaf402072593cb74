"""The messages of a conversation turn: Transcript, ReplyText, TextInput, VadEvent, ListenState
(type codes 0x20-0x24)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from .field_spec import wire
from .int_fields import BOOL, U16, U32, Enum8
from .text_fields import STR
from .message import Message
from .values import ListenStateKind, SpeechEvent


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
