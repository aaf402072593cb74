"""Opus audio: packets <-> 16-bit PCM, over the system libopus (Debian `libopus0`).

The only module that imports the binding (`opuslib_next`, which loads libopus with ctypes).
`OpusDecoder` turns one packet into PCM at the decoder's rate; `OpusEncoder` cuts a PCM stream
into packets of a fixed frame duration (20/40/60 ms), keeping a partial frame for the next call,
and `flush` pads the last one with silence. Both are cheap (on a small x86 core, per 60 ms frame:
decoding 16 kHz ~0.2 ms, encoding 24 kHz at complexity 5 ~0.5 ms; `gateway bench
--xiaozhi`), so they run inline on the link's task, once per frame. An `OpusMeter` given to
either adds up the CPU time of the calling thread spent in libopus and the audio seconds coded
(`gateway bench --xiaozhi`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from gateway.errors import GatewayError

RATES = (8000, 12000, 16000, 24000, 48000)  # what libopus codes natively
FRAME_MS = (10, 20, 40, 60)  # the frame durations a packet may hold (2.5/5 ms not offered)
MAX_PACKET_MS = 120  # the longest a single Opus packet can last


class OpusUnavailable(GatewayError):
    """libopus (Debian package libopus0) or its Python binding is missing."""

    code = "opus-unavailable"


class OpusDecodeError(GatewayError):
    """A packet that libopus cannot decode (corrupt, truncated, not Opus)."""

    code = "bad-audio"


@dataclass
class OpusMeter:
    """CPU seconds (the calling thread's, `time.thread_time`) spent in decode/encode calls, and
    the seconds of audio they decoded/encoded."""

    decode_cpu_s: float = 0.0
    decoded_s: float = 0.0
    encode_cpu_s: float = 0.0
    encoded_s: float = 0.0


def _binding():
    try:
        import opuslib_next
    except Exception as exc:  # the binding raises a bare Exception when libopus is not installed
        raise OpusUnavailable(
            f"Opus is not available ({exc}); install the Debian package libopus0 "
            "(sudo apt-get install libopus0) and the gateway's Python dependencies"
        ) from None
    return opuslib_next


def _check(rate: int, channels: int) -> None:
    if rate not in RATES:
        raise ValueError(f"Opus sample rate must be one of {RATES}, not {rate}")
    if channels not in (1, 2):
        raise ValueError(f"Opus channels must be 1 or 2, not {channels}")


class OpusDecoder:
    """One stream's decoder: `decode(packet)` -> int16 little-endian PCM at `sample_rate`."""

    def __init__(self, sample_rate: int, channels: int = 1, meter: OpusMeter | None = None) -> None:
        _check(sample_rate, channels)
        opus = _binding()
        self.sample_rate = sample_rate
        self.channels = channels
        self._meter = meter
        self._max_samples = sample_rate * MAX_PACKET_MS // 1000
        self._decoder = opus.Decoder(sample_rate, channels)
        self._error = opus.OpusError

    def decode(self, packet: bytes) -> bytes:
        if not packet:
            raise OpusDecodeError("empty Opus packet")
        started = time.thread_time() if self._meter is not None else 0.0
        try:
            pcm = bytes(self._decoder.decode(packet, self._max_samples))
        except self._error as exc:
            raise OpusDecodeError(f"undecodable Opus packet of {len(packet)} bytes: {exc}") from None
        if self._meter is not None:
            self._meter.decode_cpu_s += time.thread_time() - started
            self._meter.decoded_s += len(pcm) / (2 * self.channels * self.sample_rate)
        return pcm

    def reset(self) -> None:
        self._decoder.reset_state()


# libopus's default complexity 10 costs ~2% of a small core per second of 24 kHz speech; 5 halves
# that, and speech for a voice box's speaker sounds the same (the boxes themselves encode at 0-3).
COMPLEXITY = 5


class OpusEncoder:
    """PCM stream -> Opus packets of `frame_ms` each (partial frames wait for more PCM)."""

    def __init__(self, sample_rate: int, frame_ms: int = 60, channels: int = 1,
                 bitrate: int | None = None, application: str = "voip", meter: OpusMeter | None = None,
                 complexity: int = COMPLEXITY) -> None:
        _check(sample_rate, channels)
        if frame_ms not in FRAME_MS:
            raise ValueError(f"Opus frame duration must be one of {FRAME_MS} ms, not {frame_ms}")
        opus = _binding()
        self.sample_rate = sample_rate
        self.frame_ms = frame_ms
        self.channels = channels
        self.frame_samples = sample_rate * frame_ms // 1000
        self._frame_bytes = self.frame_samples * 2 * channels
        self._encoder = opus.Encoder(sample_rate, channels, application)
        self._encoder.complexity = complexity
        if bitrate is not None:
            self._encoder.bitrate = bitrate
        self._pending = bytearray()
        self._meter = meter

    @property
    def pending_ms(self) -> float:
        """Audio waiting for a full frame."""
        return 1000 * len(self._pending) / (2 * self.channels * self.sample_rate)

    def encode(self, pcm: bytes) -> list[bytes]:
        """Append int16 LE PCM; return the packets of every frame now complete."""
        self._pending += pcm
        packets = []
        while len(self._pending) >= self._frame_bytes:
            frame = bytes(self._pending[: self._frame_bytes])
            del self._pending[: self._frame_bytes]
            started = time.thread_time() if self._meter is not None else 0.0
            packets.append(bytes(self._encoder.encode(frame, self.frame_samples)))
            if self._meter is not None:
                self._meter.encode_cpu_s += time.thread_time() - started
                self._meter.encoded_s += self.frame_ms / 1000
        return packets

    def flush(self) -> list[bytes]:
        """Pad the partial frame with silence and encode it (no packet when nothing is pending)."""
        if not self._pending:
            return []
        self._pending += bytes(self._frame_bytes - len(self._pending))
        return self.encode(b"")

    def drop(self) -> None:
        """Forget the partial frame (after an abort)."""
        self._pending.clear()
