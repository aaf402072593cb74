"""Protocol errors with stable string codes.

A code is part of the wire contract: it travels in `Error` messages and devices may switch
on it, so a code is never renamed. The full table is in PROTOCOL.md ("Error codes").
"""

from __future__ import annotations

from enum import StrEnum


class ErrorCode(StrEnum):
    """Every stable error code of protocol v1 (the string value is what goes on the wire)."""

    # Raised by this package while decoding bytes.
    MALFORMED_MESSAGE = "malformed-message"
    UNKNOWN_MESSAGE_TYPE = "unknown-message-type"
    FRAME_TOO_LARGE = "frame-too-large"
    BAD_CRC = "bad-crc"
    BAD_FRAMING = "bad-framing"
    # Sent by the gateway about the session; defined here so both ends share one list.
    HELLO_REQUIRED = "hello-required"
    HELLO_TIMEOUT = "hello-timeout"
    BAD_SEQUENCE = "bad-sequence"
    ASR_FAILED = "asr-failed"
    TTS_FAILED = "tts-failed"
    MODEL_UNAVAILABLE = "model-unavailable"
    INTERNAL_ERROR = "internal-error"
    UNSUPPORTED_AUDIO_FORMAT = "unsupported-audio-format"
    TOO_MANY_ERRORS = "too-many-errors"
    AUTH_FAILED = "auth-failed"
    READING_INVALID = "reading-invalid"
    STORAGE_FAILED = "storage-failed"
    RATE_LIMITED = "rate-limited"
    BAD_AUDIO = "bad-audio"
    ENGINE_BUSY = "engine-busy"
    TOO_MANY_SESSIONS = "too-many-sessions"
    IDLE_TIMEOUT = "idle-timeout"
    AUTH_THROTTLED = "auth-throttled"
    LEASE_LOST = "lease-lost"  # cluster mode: in a WebSocket close reason or a CoAP 4.01, never an Error


class ProtocolError(Exception):
    """Bytes (or a dict) that are not a valid message of this protocol.

    `code` is a stable string from `ErrorCode`; `text` says what exactly was wrong.
    Every decode function of this package raises only this exception on bad input.
    """

    def __init__(self, code: str, text: str) -> None:
        super().__init__(f"{code}: {text}")
        self.code = str(code)
        self.text = text

    def __repr__(self) -> str:
        return f"ProtocolError({self.code!r}, {self.text!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ProtocolError):
            return NotImplemented
        return (self.code, self.text) == (other.code, other.text)

    def __hash__(self) -> int:
        return hash((self.code, self.text))


def malformed(text: str) -> ProtocolError:
    """Shorthand for the most common error."""
    return ProtocolError(ErrorCode.MALFORMED_MESSAGE, text)
