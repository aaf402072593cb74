"""The AudioFormat field kind: an embedded audio format of 6 bytes."""

from __future__ import annotations

from typing import Any

from .errors import malformed
from .field_spec import FieldSpec
from .reader import Reader
from .values import AudioFormat


class Format(FieldSpec):
    """An embedded AudioFormat: u8 codec, u32 sample_rate, u8 channels (6 bytes)."""

    kind = "AudioFormat"
    size = 6
    _KEYS = frozenset(("codec", "sample_rate", "channels"))

    def check(self, label: str, value: Any) -> Any:
        if not isinstance(value, AudioFormat):
            raise malformed(f"{label} must be an AudioFormat, got {type(value).__name__}")
        return value

    def write(self, value: Any, out: bytearray) -> None:
        out.append(value.codec_code)
        out += value.sample_rate.to_bytes(4, "big")
        out.append(value.channels)

    def read(self, reader: Reader, label: str) -> Any:
        raw = reader.take(6, label)
        return AudioFormat.from_codec_code(raw[0], int.from_bytes(raw[1:5], "big"), raw[5])

    def to_json(self, value: Any) -> Any:
        return {"codec": value.codec, "sample_rate": value.sample_rate, "channels": value.channels}

    def from_json(self, label: str, obj: Any) -> Any:
        if not isinstance(obj, dict) or not set(obj) <= self._KEYS:
            raise malformed(f"{label} must be an object with keys {sorted(self._KEYS)}")
        return AudioFormat(**obj)


AUDIO_FORMAT = Format()
