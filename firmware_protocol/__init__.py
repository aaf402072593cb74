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
from .messages import (
    MESSAGE_NAMES,
    MESSAGE_TYPES,
    RESERVED_TYPE_RANGES,
    Abort,
    AudioChunk,
    AudioStart,
    AudioStop,
    Error,
    Hello,
    Message,
    Ping,
    Pong,
    ReadingAck,
    ReplyText,
    SensorReading,
    TextInput,
    Transcript,
    VadEvent,
    Welcome,
)
from .values import (
    CODECS,
    PROTOCOL_VERSION,
    AudioFormat,
    Capability,
    ReadingStatus,
    SpeechEvent,
    StopReason,
)

__all__ = [
    "CODECS",
    "DEFAULT_MAX_FRAME_BYTES",
    "MESSAGE_NAMES",
    "MESSAGE_TYPES",
    "PROTOCOL_VERSION",
    "RESERVED_TYPE_RANGES",
    "Abort",
    "AudioChunk",
    "AudioFormat",
    "AudioStart",
    "AudioStop",
    "Capability",
    "Error",
    "ErrorCode",
    "Hello",
    "Message",
    "Ping",
    "Pong",
    "ProtocolError",
    "ReadingAck",
    "ReadingStatus",
    "ReplyText",
    "SensorReading",
    "StopReason",
    "StreamDeframer",
    "TextInput",
    "SpeechEvent",
    "Transcript",
    "VadEvent",
    "Welcome",
    "crc16_ccitt_false",
    "decode",
    "decode_stream_frame",
    "encode",
    "encode_stream_frame",
    "from_dict",
    "to_dict",
]
