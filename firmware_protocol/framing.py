"""Framing of messages per transport.

* WebSocket: one message per binary frame, nothing else (`encode` / `decode`); a text frame
  is refused by `decode` with `malformed-message`.
* MQTT: the payload is one message's bytes (`encode` / `decode`); topics come with the link.
* Byte streams (UART, USB serial): COBS(message || CRC-16/CCITT-FALSE big-endian) + 0x00.
"""

from __future__ import annotations

import binascii

from cobs import cobs

from .codec import decode, encode
from .errors import ErrorCode, ProtocolError
from .message import Message

DELIMITER = b"\x00"
CRC_SIZE = 2
DEFAULT_MAX_FRAME_BYTES = 4096


def crc16_ccitt_false(data: bytes) -> int:
    """CRC-16/CCITT-FALSE: poly 0x1021, init 0xFFFF, no reflection, no final xor."""
    return binascii.crc_hqx(data, 0xFFFF)


def encode_stream_frame(msg: Message) -> bytes:
    """COBS(message || crc16 big-endian) followed by one 0x00 delimiter."""
    payload = encode(msg)
    return cobs.encode(payload + crc16_ccitt_false(payload).to_bytes(CRC_SIZE, "big")) + DELIMITER


def decode_stream_frame(frame: bytes) -> Message:
    """Decode one stream frame given without its 0x00 delimiter.

    Raises `ProtocolError`: `bad-framing` (not valid COBS or shorter than a CRC), `bad-crc`,
    or whatever `decode` raises for the message inside.
    """
    try:
        raw = cobs.decode(bytes(frame))
    except cobs.DecodeError as exc:
        raise ProtocolError(ErrorCode.BAD_FRAMING, f"invalid COBS: {exc}") from None
    if len(raw) < CRC_SIZE:
        raise ProtocolError(ErrorCode.BAD_FRAMING, f"frame of {len(raw)} bytes has no CRC")
    payload, crc = raw[:-CRC_SIZE], int.from_bytes(raw[-CRC_SIZE:], "big")
    expected = crc16_ccitt_false(payload)
    if crc != expected:
        raise ProtocolError(
            ErrorCode.BAD_CRC, f"CRC is 0x{crc:04x}, the payload's CRC is 0x{expected:04x}"
        )
    return decode(payload)


class StreamDeframer:
    """Split a byte stream into messages; never raises on bad input, reports it instead.

    `max_frame_bytes` bounds one encoded frame (the COBS bytes between two delimiters): a
    longer frame yields one `frame-too-large` error as soon as it is seen and the rest of it
    is dropped up to the next delimiter, so at most `max_frame_bytes` are ever buffered.
    Empty frames (consecutive 0x00 bytes) are ignored, so 0x00 can be sent as idle filler.
    """

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        if max_frame_bytes < 1:
            raise ValueError("max_frame_bytes must be positive")
        self.max_frame_bytes = max_frame_bytes
        self._buffer = bytearray()
        self._discarding = False

    @property
    def buffered(self) -> int:
        """Bytes of an unfinished frame held so far."""
        return len(self._buffer)

    def reset(self) -> None:
        """Forget any partial frame (e.g. after the port was reopened)."""
        self._buffer.clear()
        self._discarding = False

    def feed(self, data: bytes) -> list[Message | ProtocolError]:
        """Consume bytes; return the messages and errors of every frame they complete."""
        data = bytes(data)
        out: list[Message | ProtocolError] = []
        start = 0
        while (end := data.find(DELIMITER, start)) != -1:
            self._add(data[start:end], out)
            if not self._discarding and self._buffer:
                out.append(self._decode(bytes(self._buffer)))
            self._buffer.clear()
            self._discarding = False
            start = end + 1
        self._add(data[start:], out)
        return out

    def _add(self, chunk: bytes, out: list[Message | ProtocolError]) -> None:
        if self._discarding or not chunk:
            return
        if len(self._buffer) + len(chunk) > self.max_frame_bytes:
            out.append(
                ProtocolError(
                    ErrorCode.FRAME_TOO_LARGE,
                    f"frame exceeds {self.max_frame_bytes} bytes, skipped to the next delimiter",
                )
            )
            self._buffer.clear()
            self._discarding = True
            return
        self._buffer += chunk

    @staticmethod
    def _decode(frame: bytes) -> Message | ProtocolError:
        try:
            return decode_stream_frame(frame)
        except ProtocolError as exc:
            return exc
