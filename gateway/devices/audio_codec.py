"""Opus on the gateway's own protocol: codec `1 = opus` in a Hello's audio_in / audio_out.

The voice pipeline hears and speaks PCM; a device that asks for Opus gets a `CodecConnection`
around its link's connection (every link: WebSocket, MQTT, CoAP, serial), so the session sees
PCM and the device Opus:

* **device -> gateway**: each `AudioChunk` of an Opus stream holds exactly one Opus packet (any
  frame duration the device likes, 2.5..120 ms: a packet says its own); it is decoded to PCM at
  the stream's rate. An `AudioStart` with an Opus format starts a new decoder. An undecodable
  packet is a `bad-audio` error (logged, the session goes on);
* **gateway -> device**: the reply PCM is encoded in packets of `OPUS_FRAME_MS` (20 ms), one per
  `AudioChunk` (seq renumbered per stream from 0); `AudioStart` announces the Opus format, the
  last partial frame is padded with silence at `AudioStop` (dropped when the reply was aborted).

Opus rates are libopus's own (8000, 12000, 16000, 24000, 48000 Hz), mono. An Opus audio_out at
another rate gets the nearest of those in Welcome (the device MUST play what Welcome says).
"""

from __future__ import annotations

from dataclasses import dataclass

from firmware_protocol import AudioChunk, AudioFormat, AudioStart, AudioStop, Hello, Message, ProtocolError, StopReason
from firmware_protocol.values import OPUS_FRAME_MS
from gateway.audio.opus import RATES, OpusDecodeError, OpusDecoder, OpusEncoder, OpusUnavailable
from gateway.links.base import DeviceConnection

PCM, OPUS = "pcm_s16le", "opus"


@dataclass(frozen=True)
class AudioPlan:
    """What a Hello's formats mean for the session."""

    pcm_in: AudioFormat  # what the conversation hears
    pcm_out: AudioFormat  # what the conversation speaks
    wire_out: AudioFormat  # what Welcome announces (the device plays it)
    wire_in_opus: bool = False  # the device's microphone sends Opus
    problem: str | None = None  # an `unsupported-audio-format` text

    @property
    def opus_in(self) -> bool:
        return self.wire_in_opus and self.problem is None

    @property
    def opus_out(self) -> bool:
        return self.wire_out.codec == OPUS


def _nearest(rate: int) -> int:
    return min(RATES, key=lambda r: (abs(r - rate), -r))


def plan_audio(hello: Hello, default_rate: int) -> AudioPlan:
    requested_in, requested_out = hello.audio_in, hello.audio_out
    problem = None
    pcm_in = AudioFormat(PCM, requested_in.sample_rate, 1)
    if requested_in.codec == OPUS and (requested_in.sample_rate not in RATES or requested_in.channels != 1):
        problem = (f"audio_in opus {requested_in.sample_rate} Hz x{requested_in.channels} is not supported: "
                   f"opus is mono at one of {', '.join(map(str, RATES))} Hz")
    elif requested_in.codec not in (PCM, OPUS):
        problem = f"audio_in codec {requested_in.codec} is not supported; send pcm_s16le or opus"
    if requested_out.codec == OPUS:
        rate = _nearest(requested_out.sample_rate)
        wire_out = AudioFormat(OPUS, rate, 1)
    else:
        rate = requested_out.sample_rate if requested_out.codec == PCM else default_rate
        wire_out = AudioFormat(PCM, rate, 1)
    if problem is None and (requested_in.codec == OPUS or wire_out.codec == OPUS):
        try:  # libopus present? (quickstart installs it; a bare system may lack it)
            OpusDecoder(16000)
        except OpusUnavailable as exc:
            problem, wire_out, rate = exc.text, AudioFormat(PCM, default_rate, 1), default_rate
    return AudioPlan(pcm_in, AudioFormat(PCM, rate, 1), wire_out, requested_in.codec == OPUS, problem)


class CodecConnection:
    """The device's connection with its Opus streams decoded (in) and encoded (out)."""

    def __init__(self, conn: DeviceConnection, plan: AudioPlan, frame_ms: int = OPUS_FRAME_MS) -> None:
        self.conn = conn
        self.peer = conn.peer
        self.plan = plan
        self._frame_ms = frame_ms
        self._decoders: dict[int, OpusDecoder] = {}  # device stream id -> its decoder (opus in)
        self._encoders: dict[int, OpusEncoder] = {}  # reply stream id -> its encoder (opus out)
        self._seq: dict[int, int] = {}

    @classmethod
    def wrap(cls, conn: DeviceConnection, plan: AudioPlan) -> DeviceConnection:
        """`conn` itself when neither direction is Opus."""
        return cls(conn, plan) if plan.opus_in or plan.opus_out else conn

    # ---- device -> gateway -----------------------------------------------------------------------
    async def receive(self) -> Message | ProtocolError:
        msg = await self.conn.receive()
        if isinstance(msg, AudioStart) and msg.format.codec == OPUS:
            fmt = msg.format
            if fmt.sample_rate not in RATES or fmt.channels != 1:
                return ProtocolError("unsupported-audio-format",
                                     f"opus stream at {fmt.sample_rate} Hz x{fmt.channels}: opus is mono at one of {RATES} Hz")
            self._decoders[msg.stream_id] = OpusDecoder(fmt.sample_rate)
            return AudioStart(stream_id=msg.stream_id, format=AudioFormat(PCM, fmt.sample_rate, 1))
        if isinstance(msg, AudioChunk) and self.plan.opus_in:
            decoder = self._decoders.get(msg.stream_id)
            if decoder is None:  # a stream without AudioStart: the Hello's audio_in
                decoder = self._decoders[msg.stream_id] = OpusDecoder(self.plan.pcm_in.sample_rate)
            try:
                pcm = decoder.decode(msg.data)
            except OpusDecodeError as exc:
                return ProtocolError("bad-audio", f"stream {msg.stream_id} seq {msg.seq}: {exc.text}")
            return AudioChunk(stream_id=msg.stream_id, seq=msg.seq, data=pcm)
        if isinstance(msg, AudioStop):
            self._decoders.pop(msg.stream_id, None)
        return msg

    # ---- gateway -> device -----------------------------------------------------------------------
    async def send(self, message: Message) -> None:
        if not self.plan.opus_out:
            await self.conn.send(message)
        elif isinstance(message, AudioStart):
            self._encoders[message.stream_id] = OpusEncoder(self.plan.wire_out.sample_rate, self._frame_ms)
            self._seq[message.stream_id] = 0
            await self.conn.send(AudioStart(stream_id=message.stream_id, format=self.plan.wire_out))
        elif isinstance(message, AudioChunk):
            encoder = self._encoders.get(message.stream_id)
            if encoder is None:  # a chunk without AudioStart: a stream of the Welcome's format
                encoder = self._encoders[message.stream_id] = OpusEncoder(self.plan.wire_out.sample_rate, self._frame_ms)
            await self._packets(message.stream_id, encoder.encode(message.data))
        elif isinstance(message, AudioStop):
            encoder = self._encoders.pop(message.stream_id, None)
            if encoder is not None and message.reason != StopReason.ABORTED:
                await self._packets(message.stream_id, encoder.flush())
            self._seq.pop(message.stream_id, None)
            await self.conn.send(message)
        else:
            await self.conn.send(message)

    async def _packets(self, stream_id: int, packets: list[bytes]) -> None:
        for packet in packets:
            seq = self._seq.get(stream_id, 0)
            self._seq[stream_id] = seq + 1
            await self.conn.send(AudioChunk(stream_id=stream_id, seq=seq, data=packet))

    async def close(self, reason: str = "") -> None:
        await self.conn.close(reason)
