"""Wire contract v1 between the gateway and its devices (spec: PROTOCOL.md).

Pure Python, no I/O: message classes, the binary codec, framing per transport, and the
golden vectors shared with the C implementation.
"""

from .codec import decode, encode, from_dict, to_dict
from .errors import ErrorCode, ProtocolError
from .framing import (
    DEFAULT_MAX_FRAME_BYTES,
    StreamDeframer,
    crc16_ccitt_false,
    decode_stream_frame,
    encode_stream_frame,
)
from .audio_messages import AudioChunk, AudioStart, AudioStop
from .expression_messages import Action, ExpressionSetup, Mouth, Sentiment, ServoKeyframes, Visemes
from .message import Message
from .messages import MESSAGE_NAMES, MESSAGE_TYPES, RESERVED_TYPE_RANGES
from .reading_messages import ReadingAck, SensorReading
from .session_messages import Abort, Error, Hello, Ping, Pong, Welcome
from .turn_messages import ListenState, ReplyText, TextInput, Transcript, VadEvent
from .values import (
    CODECS,
    PROTOCOL_VERSION,
    AudioFormat,
    Capability,
    ListenStateKind,
    ReadingStatus,
    SpeechEvent,
    StopReason,
    Viseme,
)

__all__ = [
    "CODECS",
    "DEFAULT_MAX_FRAME_BYTES",
    "MESSAGE_NAMES",
    "MESSAGE_TYPES",
    "PROTOCOL_VERSION",
    "RESERVED_TYPE_RANGES",
    "Abort",
    "Action",
    "AudioChunk",
    "AudioFormat",
    "AudioStart",
    "AudioStop",
    "Capability",
    "Error",
    "ErrorCode",
    "ExpressionSetup",
    "Hello",
    "ListenState",
    "ListenStateKind",
    "Message",
    "Mouth",
    "Ping",
    "Pong",
    "ProtocolError",
    "ReadingAck",
    "ReadingStatus",
    "ReplyText",
    "SensorReading",
    "Sentiment",
    "ServoKeyframes",
    "StopReason",
    "StreamDeframer",
    "TextInput",
    "SpeechEvent",
    "Transcript",
    "VadEvent",
    "Viseme",
    "Visemes",
    "Welcome",
    "crc16_ccitt_false",
    "decode",
    "decode_stream_frame",
    "encode",
    "encode_stream_frame",
    "from_dict",
    "to_dict",
]
