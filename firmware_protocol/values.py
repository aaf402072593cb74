"""Value types embedded in messages: audio format, capability flags, stop reasons."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum, IntFlag

from .errors import malformed

PROTOCOL_VERSION = 1
"""The protocol version this package speaks (sent in `Hello` and `Welcome`)."""

CODECS: tuple[str, ...] = ("pcm_s16le", "opus")
"""Codec names by wire code: index 0 is `pcm_s16le`, 1 is `opus`."""

OPUS_FRAME_MS = 20
"""Duration of each Opus packet the gateway sends (not on the wire: a packet says its own)."""

MIN_SAMPLE_RATE = 8000
MAX_SAMPLE_RATE = 48000
MAX_CHANNELS = 2


class Capability(IntFlag):
    """What a device can do, announced as a u32 bit set in `Hello.capabilities`.

    Unknown bits are kept (a newer device may announce more than this version knows).
    """

    AUDIO_IN = 1
    AUDIO_OUT = 2
    TEXT = 4
    VISEMES = 8  # wants a Visemes track (0x30) per spoken sentence
    MOUTH = 16  # wants Mouth open values (0x31) per spoken sentence
    ACTION = 32  # wants Action (0x32) and Sentiment (0x33) per spoken sentence
    SERVO = 64  # wants ServoKeyframes (0x34) per spoken sentence
    SENSOR = 128  # future sensor readings (0x40-0x4F)
    SCREEN = 256
    LISTEN = 512  # wants ListenState (0x24): asleep / listening / woken, for its LED (listen.mode wake)
    WAKE_WORD = 1024  # detects its own wake word and streams only once woken: no server wake word


class StopReason(IntEnum):
    """Why an audio stream ended (`AudioStop.reason`, u8)."""

    END = 0
    ABORTED = 1
    ERROR = 2


class SpeechEvent(IntEnum):
    """What the gateway's voice activity detector saw (`VadEvent.event`, u8)."""

    SPEECH_START = 0
    SPEECH_END = 1


class ListenStateKind(IntEnum):
    """The gateway's listen state for a device (`ListenState.state`, u8)."""

    ASLEEP = 0  # a turn needs the wake word
    LISTENING = 1  # the next utterance is a turn without the wake word (a follow-up window)
    WOKEN = 2  # the wake word was heard: the question follows


class ReadingStatus(IntEnum):
    """What the gateway did with a `SensorReading` (`ReadingAck.status`, u8)."""

    STORED = 0  # validated and stored durably
    DUPLICATE = 1  # this device + seq was stored before; not stored again
    REJECTED = 2  # invalid or not storable; `code` and `text` say why; nothing stored


class Viseme(IntEnum):
    """The 15 OVR lip-sync visemes (`Visemes.visemes[].viseme`, u8), in OVR order."""

    SIL = 0
    PP = 1
    FF = 2
    TH = 3
    DD = 4
    KK = 5
    CH = 6
    SS = 7
    NN = 8
    RR = 9
    AA = 10
    E = 11
    IH = 12
    OH = 13
    OU = 14


@dataclass(frozen=True)
class AudioFormat:
    """An audio stream's format; 6 bytes on the wire: u8 codec, u32 sample_rate, u8 channels.

    PCM is signed 16-bit little-endian, interleaved when there are two channels.
    """

    codec: str = "pcm_s16le"
    sample_rate: int = 16000
    channels: int = 1

    def __post_init__(self) -> None:
        if not isinstance(self.codec, str) or self.codec not in CODECS:
            raise malformed(f"AudioFormat.codec must be one of {CODECS}, got {self.codec!r}")
        if not _is_int(self.sample_rate) or not (
            MIN_SAMPLE_RATE <= self.sample_rate <= MAX_SAMPLE_RATE
        ):
            raise malformed(
                f"AudioFormat.sample_rate must be {MIN_SAMPLE_RATE}..{MAX_SAMPLE_RATE},"
                f" got {self.sample_rate!r}"
            )
        if not _is_int(self.channels) or not (1 <= self.channels <= MAX_CHANNELS):
            raise malformed(
                f"AudioFormat.channels must be 1..{MAX_CHANNELS}, got {self.channels!r}"
            )

    @property
    def codec_code(self) -> int:
        """The codec's u8 wire code."""
        return CODECS.index(self.codec)

    @classmethod
    def from_codec_code(cls, code: int, sample_rate: int, channels: int) -> AudioFormat:
        """Build from wire values; an unknown codec code is a `malformed-message`."""
        if not 0 <= code < len(CODECS):
            raise malformed(f"AudioFormat.codec: unknown codec code {code}")
        return cls(CODECS[code], sample_rate, channels)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
