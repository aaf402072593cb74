"""The xiaozhi-esp32 WebSocket wire format, pure (no I/O): binary audio frames and JSON messages.

From the firmware (78/xiaozhi-esp32 main/protocols/protocol.h, websocket_protocol.cc), big-endian:

* version 1: a binary frame is one raw Opus packet;
* version 2: ``u16 version, u16 type (0 opus, 1 json), u32 reserved, u32 timestamp_ms,
  u32 payload_size`` (16 bytes), then the payload;
* version 3: ``u8 type, u8 reserved, u16 payload_size`` (4 bytes), then the payload.

Text frames are JSON objects with a ``type``. Bad input raises `ProtocolError` with a stable code.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from typing import Any

from firmware_protocol import ProtocolError

VERSIONS = (1, 2, 3)
TYPE_OPUS, TYPE_JSON = 0, 1
_V2 = struct.Struct(">HHIII")
_V3 = struct.Struct(">BBH")

UNSUPPORTED_VERSION = "unsupported-protocol-version"

# Error codes that end a xiaozhi session, and the WebSocket close code each gets.
CLOSE_CODES = {
    "auth-failed": 1008,  # policy violation
    "too-many-errors": 1008,
    "hello-timeout": 1002,  # protocol error
    "hello-required": 1002,
    "bad-sequence": 1002,
    UNSUPPORTED_VERSION: 1002,
    "malformed-message": 1007,  # invalid payload data
    "unsupported-audio-format": 1003,  # unsupported data
    "frame-too-large": 1009,  # message too big
}
ALERT_CODES = {"asr-failed", "tts-failed", "internal-error", "model-unavailable"}


@dataclass(frozen=True)
class BinaryFrame:
    kind: int  # TYPE_OPUS or TYPE_JSON
    payload: bytes
    timestamp_ms: int = 0


def check_version(value: str | int | None) -> int:
    """The binary protocol version from the Protocol-Version header (absent: 1)."""
    if value is None or value == "":
        return 1
    try:
        version = int(value)
    except (TypeError, ValueError):
        raise ProtocolError(UNSUPPORTED_VERSION, f"protocol version {value!r} is not a number") from None
    if version not in VERSIONS:
        raise ProtocolError(UNSUPPORTED_VERSION, f"protocol version {version} is not supported (1, 2 or 3)")
    return version


def decode_binary(data: bytes, version: int) -> BinaryFrame:
    if version == 1:
        return BinaryFrame(TYPE_OPUS, data)
    header = _V2 if version == 2 else _V3
    if len(data) < header.size:
        raise ProtocolError("malformed-message", f"v{version} frame of {len(data)} bytes is shorter than its {header.size}-byte header")
    if version == 2:
        _, kind, _, timestamp, size = _V2.unpack_from(data)
    else:
        kind, _, size = _V3.unpack_from(data)
        timestamp = 0
    payload = data[header.size :]
    if size != len(payload):
        raise ProtocolError("malformed-message", f"v{version} header says {size} payload bytes, the frame has {len(payload)}")
    if kind not in (TYPE_OPUS, TYPE_JSON):
        raise ProtocolError("malformed-message", f"v{version} frame of unknown type {kind}")
    return BinaryFrame(kind, payload, timestamp)


def encode_audio(packet: bytes, version: int, timestamp_ms: int = 0) -> bytes:
    if version == 1:
        return packet
    if version == 2:
        return _V2.pack(2, TYPE_OPUS, 0, timestamp_ms & 0xFFFFFFFF, len(packet)) + packet
    if len(packet) > 0xFFFF:
        raise ValueError(f"a v3 payload holds at most 65535 bytes, not {len(packet)}")
    return _V3.pack(TYPE_OPUS, 0, len(packet)) + packet


def parse_json(text: str | bytes) -> dict[str, Any]:
    """A device's JSON message: an object with a string `type`."""
    try:
        value = json.loads(text)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ProtocolError("malformed-message", f"not JSON: {exc}") from None
    if not isinstance(value, dict) or not isinstance(value.get("type"), str):
        raise ProtocolError("malformed-message", "a JSON message must be an object with a string \"type\"")
    return value


def dump(message: dict[str, Any]) -> str:
    return json.dumps(message, ensure_ascii=False, separators=(",", ":"))


# ---- server -> device messages --------------------------------------------------------------------


def hello_reply(session_id: str, sample_rate: int, frame_ms: int) -> dict[str, Any]:
    return {"type": "hello", "transport": "websocket", "session_id": session_id,
            "audio_params": {"format": "opus", "sample_rate": sample_rate, "channels": 1, "frame_duration": frame_ms}}


def stt(session_id: str, text: str) -> dict[str, Any]:
    return {"session_id": session_id, "type": "stt", "text": text}


def tts(session_id: str, state: str, text: str | None = None) -> dict[str, Any]:
    msg = {"session_id": session_id, "type": "tts", "state": state}
    if text is not None:
        msg["text"] = text
    return msg


def llm(session_id: str, emotion: str, emoji: str) -> dict[str, Any]:
    return {"session_id": session_id, "type": "llm", "text": emoji, "emotion": emotion}


def alert(session_id: str, status: str, message: str, emotion: str) -> dict[str, Any]:
    return {"session_id": session_id, "type": "alert", "status": status, "message": message, "emotion": emotion}


def mcp(session_id: str, payload: dict[str, Any]) -> dict[str, Any]:
    return {"session_id": session_id, "type": "mcp", "payload": payload}
