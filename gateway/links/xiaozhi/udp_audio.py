"""The xiaozhi MQTT+UDP audio datagram, pure (no I/O).

From the firmware (78/xiaozhi-esp32 main/protocols/mqtt_protocol.cc, docs/mqtt-udp.md) and its
server counterpart (xiaozhi-mqtt-gateway), big-endian:

    type u8 (1) | flags u8 | payload_len u16 | ssrc u32 | timestamp u32 | sequence u32 | payload

The 16-byte header is also the AES-128-CTR counter block that encrypts the Opus payload. The
server hands each session a random key and a nonce (hex, in the hello reply's `udp` section); the
box keeps the nonce's type, flags and ssrc and writes payload_len, timestamp and sequence into
each header (so the ssrc names the session). AES-CTR has no integrity check: a datagram sealed
under another key decrypts to noise, which `opus_packet_ms` then rejects (not a mono packet of the
announced frame duration; random bytes pass that in about 1 case in 70).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from firmware_protocol import ProtocolError

HEADER = struct.Struct(">BBHIII")
TYPE_AUDIO = 1
KEY_BYTES = 16


@dataclass(frozen=True)
class AudioHeader:
    flags: int
    payload_len: int
    ssrc: int
    timestamp: int
    sequence: int


def new_nonce(ssrc: int) -> bytes:
    """The nonce the hello reply gives the box: a header with its ssrc, length/timestamp/sequence 0."""
    return HEADER.pack(TYPE_AUDIO, 0, 0, ssrc, 0, 0)


def parse_header(datagram: bytes) -> AudioHeader:
    if len(datagram) < HEADER.size:
        raise ProtocolError("malformed-message", f"datagram of {len(datagram)} bytes is shorter than the 16-byte header")
    kind, flags, length, ssrc, timestamp, sequence = HEADER.unpack_from(datagram)
    if kind != TYPE_AUDIO:
        raise ProtocolError("malformed-message", f"datagram of type {kind} (audio is type 1)")
    if length != len(datagram) - HEADER.size:
        raise ProtocolError("malformed-message",
                            f"header says {length} payload bytes, the datagram has {len(datagram) - HEADER.size}")
    return AudioHeader(flags, length, ssrc, timestamp, sequence)


def _ctr(key: bytes, counter_block: bytes, data: bytes) -> bytes:
    return Cipher(algorithms.AES(key), modes.CTR(counter_block)).encryptor().update(data)


def seal(key: bytes, nonce: bytes, payload: bytes, timestamp: int, sequence: int) -> bytes:
    """One datagram: the nonce's type/flags/ssrc with this length, timestamp and sequence, then the
    payload encrypted under that header (what the firmware's SendAudio does)."""
    if len(payload) > 0xFFFF:
        raise ValueError(f"a datagram carries at most 65535 payload bytes, not {len(payload)}")
    header = nonce[:2] + struct.pack(">H", len(payload)) + nonce[4:8] + struct.pack(">II", timestamp & 0xFFFFFFFF,
                                                                                    sequence & 0xFFFFFFFF)
    return header + _ctr(key, header, payload)


def open_payload(key: bytes, datagram: bytes) -> bytes:
    """The decrypted payload of a datagram whose header `parse_header` accepted."""
    return _ctr(key, datagram[: HEADER.size], datagram[HEADER.size :])


def _frame_ms(config: int) -> float:
    if config < 12:  # SILK narrow/medium/wide band
        return (10, 20, 40, 60)[config % 4]
    if config < 16:  # hybrid
        return (10, 20)[config % 2]
    return (2.5, 5, 10, 20)[config % 4]  # CELT


def opus_packet_ms(packet: bytes) -> float | None:
    """Duration of a mono Opus packet from its TOC byte (RFC 6716 3.1), None if it is not one."""
    if not packet or packet[0] & 0x04:  # empty, or stereo
        return None
    code = packet[0] & 0x03
    if code == 0:
        frames = 1
    elif code == 1:
        frames = 2
        if (len(packet) - 1) % 2:
            return None  # two frames of equal size
    elif code == 2:
        frames = 2
        if len(packet) < 2:
            return None
    else:
        if len(packet) < 2 or not packet[1] & 0x3F:
            return None
        frames = packet[1] & 0x3F
    ms = frames * _frame_ms(packet[0] >> 3)
    return ms if ms <= 120 else None
