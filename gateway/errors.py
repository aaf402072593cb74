"""Gateway errors with stable string codes.

A code is part of the public contract: devices may switch on it, so never rename one.
The full list is documented in firmware_protocol/PROTOCOL.md ("Error codes").
"""

from __future__ import annotations


class GatewayError(Exception):
    """An error that renders into an `Error` message for the device."""

    code = "internal-error"

    def __init__(self, text: str, *, code: str | None = None) -> None:
        super().__init__(text)
        if code is not None:
            self.code = code
        self.text = text


class ConfigError(GatewayError):
    code = "config-invalid"


class ModelError(GatewayError):
    """A model is missing, broken or could not be prepared."""

    code = "model-unavailable"


class AsrError(GatewayError):
    code = "asr-failed"


class TtsError(GatewayError):
    code = "tts-failed"


class EngineBusy(GatewayError):
    """Every worker of an engine is busy and its waiting line is full: the call is refused."""

    code = "engine-busy"


class SessionError(GatewayError):
    """The device broke the session rules (e.g. audio before hello)."""

    code = "bad-sequence"
