"""A xiaozhi-esp32 box as a `DeviceConnection`: its protocol translated to and from the wire contract.

So the box's session runs through the same `serve_device`, voice pipeline, brain, memory,
expression and screens as every other device. Inbound: the box's JSON hello -> `Hello` (PCM
audio in/out, ACTION so Action/Sentiment arrive), Opus packets -> `AudioChunk` PCM, `listen stop`
-> `AudioStop` (push-to-talk released), `listen start` -> `AudioStart` (the microphone opens: in
`listen.mode` ptt the turns are heard only from there to `listen stop`), `abort` -> `Abort`;
`listen detect` is logged; `mcp` -> the box's tools (box_tools.py: listed after the welcome when its
hello has features.mcp, called by the brain, the MCP server and Action codes). Outbound:
`Welcome` -> hello reply, `Transcript` -> `stt`, a reply's first
`ReplyText`/`AudioStart` -> `tts start`, `ReplyText(final=False)` -> `tts sentence_start`,
Action/Sentiment -> one `llm {emotion}` per sentence, PCM -> Opus at the box's frame duration
(paced so its queue never overflows), the closing `ReplyText(final=True)` -> `tts stop` (the
reply's half: reply.py).
The xiaozhi protocol has no error message: a fatal `Error` closes the channel (the WebSocket with
a close code and the reason; MQTT+UDP with a `goodbye`), others are logged (and shown as an `alert`
when the reply failed). What carries the messages is a `BoxChannel` (channel.py): the WebSocket
(ws_channel.py) or MQTT + UDP (mqtt_channel.py); a `goodbye` from the box ends the session.

On the WebSocket the box's connection is a `RoamingXiaozhiConnection` (roaming.py): in cluster
mode its session holds the device's lease and ends with close code 4409 when another member takes it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from firmware_protocol import (
    Abort,
    Action,
    AudioChunk,
    AudioFormat,
    AudioStart,
    AudioStop,
    Capability,
    Error,
    Hello,
    ListenState,
    Message,
    ProtocolError,
    ReplyText,
    Sentiment,
    StopReason,
    Transcript,
    Welcome,
)
from gateway.audio.opus import OpusDecodeError, OpusDecoder, OpusEncoder, OpusMeter, OpusUnavailable, RATES
from gateway.links.base import LinkClosed
from gateway.devices.device_tools import DeviceToolError
from gateway.links.xiaozhi import framing
from gateway.links.xiaozhi.channel import BoxChannel
from gateway.links.xiaozhi.framing import ALERT_CODES, CLOSE_CODES
from gateway.links.xiaozhi.box_mcp import BoxMcp
from gateway.links.xiaozhi.box_tools import BoxTools, ToolServices
from gateway.links.xiaozhi.emotions import EmotionTable
from gateway.links.xiaozhi.identity import device_id_of
from gateway.links.xiaozhi.reply import BoxReply

log = logging.getLogger(__name__)

_MIC_STREAM = 1


@dataclass(frozen=True)
class XiaozhiSettings:
    sample_rate: int = 24000  # reply audio to the box
    frame_ms: int = 60
    max_ahead_ms: int = 1200
    max_frame_bytes: int = 65536


class XiaozhiConnection:
    def __init__(self, channel: BoxChannel, settings: XiaozhiSettings, emotions: EmotionTable,
                 clock: Callable[[], float] = time.monotonic, tools: ToolServices | None = None,
                 opus_meter: OpusMeter | None = None) -> None:
        self._channel = channel
        self.mac = channel.mac
        self.client_id = channel.client_id
        self.peer = channel.peer
        self._set = settings
        self._token = channel.token
        self._user_agent = channel.user_agent
        self._pending: ProtocolError | None = channel.opening_error()
        self.version = channel.version
        self._box_left = False  # the box said goodbye: none back
        self.mode = "auto"
        self._hello = False
        self._session = ""
        self._decoder: OpusDecoder | None = None
        self._mic_rate = 16000  # the box's microphone rate (its hello's audio_params)
        self._reply = BoxReply(channel, settings.frame_ms, settings.max_ahead_ms, emotions, clock)
        self._seq = 0
        self._closed = False
        self._tool_services = tools
        self._box_tools: BoxTools | None = None  # when the hello says features.mcp
        self._device_id = ""
        self._opus_meter = opus_meter  # `gateway bench --xiaozhi`: the CPU its Opus costs

    # ---- inbound ----------------------------------------------------------------------------
    async def receive(self) -> Message | ProtocolError:
        if self._pending is not None:
            error, self._pending = self._pending, None
            return error
        while True:
            data = await self._channel.receive()
            if isinstance(data, ProtocolError):
                return data
            try:
                message = self._binary(data) if isinstance(data, bytes) else self._text(data)
            except ProtocolError as exc:
                return exc
            if message is not None:
                return message

    def _binary(self, data: bytes) -> Message | None:
        if not self._hello or self._decoder is None:
            raise ProtocolError("hello-required", "binary frame before hello")
        try:
            pcm = self._decoder.decode(data)
        except OpusDecodeError as exc:
            raise ProtocolError("bad-audio", exc.text) from None
        self._seq += 1
        return AudioChunk(stream_id=_MIC_STREAM, seq=self._seq, data=pcm)

    def _text(self, text: str | bytes) -> Message | None:
        msg = framing.parse_json(text)
        kind = msg["type"]
        if kind == "hello":
            return self._on_hello(msg)
        if not self._hello:
            raise ProtocolError("hello-required", f"{kind!r} before hello")
        if kind == "listen":
            return self._on_listen(msg)
        if kind == "abort":
            return Abort(reason=str(msg.get("reason") or "abort from the box"))
        if kind == "goodbye":
            self._box_left = True
            raise LinkClosed("the box said goodbye")
        if kind == "mcp":
            if self._box_tools is not None:
                self._box_tools.mcp.on_payload(msg.get("payload"))
            else:
                log.debug("%s: mcp message ignored (its hello did not announce features.mcp)", self.peer)
        else:
            log.info("%s: %r message ignored (not supported)", self.peer, kind)
        return None

    def _on_hello(self, msg: dict[str, Any]) -> Hello:
        if self._hello:
            raise ProtocolError("bad-sequence", "a second hello on the same connection")
        self._channel.check_hello(msg)
        params = msg.get("audio_params") or {}
        if not isinstance(params, dict):
            raise ProtocolError("malformed-message", "audio_params must be an object")
        fmt, rate, channels = params.get("format", "opus"), params.get("sample_rate", 16000), params.get("channels", 1)
        if fmt != "opus" or rate not in RATES or channels != 1:
            raise ProtocolError("unsupported-audio-format",
                                f"microphone audio {fmt} {rate} Hz x{channels} is not supported (opus, mono, {RATES} Hz)")
        device_id = device_id_of(self.mac)
        if device_id is None:
            raise ProtocolError("auth-failed", f"Device-Id header {self.mac!r} is not a MAC address: the box cannot be identified")
        try:
            self._decoder = OpusDecoder(rate, meter=self._opus_meter)
            self._reply.encoder = OpusEncoder(self._set.sample_rate, self._set.frame_ms, meter=self._opus_meter)
        except OpusUnavailable as exc:
            log.error("%s: %s", self.peer, exc.text)
            raise ProtocolError("unsupported-audio-format", exc.text) from None
        self._hello = True
        self._mic_rate = rate
        self._device_id = device_id
        features = msg.get("features") if isinstance(msg.get("features"), dict) else {}
        if features.get("mcp") is True and self._tool_services is not None:
            mcp = BoxMcp(self.peer, self._send_mcp, self._tool_services.registry.timeout_s)
            self._box_tools = BoxTools(mcp, self._tool_services)
        log.info("%s: xiaozhi hello, protocol v%d, Client-Id %s, %s, features %s", self.peer, self.version,
                 self.client_id or "-", self._user_agent or "no User-Agent", sorted(k for k, v in features.items() if v))
        return Hello(
            device_id=device_id,
            token=self._token,
            # WAKE_WORD: a stock box wakes itself (its wake word or button) before it streams, so it gets
            # listen.mode always unless listen.devices names it; LISTEN: told when the gateway's is heard.
            capabilities=(Capability.AUDIO_IN | Capability.AUDIO_OUT | Capability.ACTION | Capability.LISTEN
                          | Capability.WAKE_WORD),
            audio_in=AudioFormat(codec="pcm_s16le", sample_rate=rate, channels=1),
            audio_out=AudioFormat(codec="pcm_s16le", sample_rate=self._set.sample_rate, channels=1),
            firmware=self._user_agent[:120],
        )

    def _on_listen(self, msg: dict[str, Any]) -> Message | None:
        state = msg.get("state")
        if isinstance(msg.get("mode"), str):
            self.mode = msg["mode"]
        if state == "start":
            log.debug("%s: listening (%s mode)", self.peer, self.mode)
            return AudioStart(stream_id=_MIC_STREAM, format=AudioFormat(codec="pcm_s16le", sample_rate=self._mic_rate,
                                                                        channels=1))
        elif state == "stop":
            return AudioStop(stream_id=_MIC_STREAM, reason=StopReason.END)
        elif state == "detect":
            log.info("%s: wake word %r detected (the gateway listens to what follows)", self.peer, msg.get("text", ""))
        else:
            raise ProtocolError("malformed-message", f"listen state {state!r} is not start, stop or detect")
        return None

    # ---- outbound ---------------------------------------------------------------------------
    async def send(self, message: Message) -> None:
        await self._send(message)

    async def _json(self, msg: dict[str, Any]) -> None:
        await self._channel.send_json(msg)

    async def _send_mcp(self, payload: dict[str, Any]) -> None:
        try:
            await self._json(framing.mcp(self._session, payload))
        except LinkClosed:
            raise DeviceToolError("device-gone", "the device disconnected") from None

    async def _send(self, message: Message) -> None:
        if isinstance(message, AudioChunk):
            await self._reply.audio(message.data)
        elif isinstance(message, ReplyText):
            if not message.final:
                await self._reply.sentence(self._session, message.text)
            else:
                await self._reply.end(self._session)
        elif isinstance(message, AudioStart):
            await self._reply.audio_start(self._session)
        elif isinstance(message, AudioStop):
            await self._reply.audio_stop(message.reason == StopReason.ABORTED)
        elif isinstance(message, Action):
            self._reply.action(message.code)
            if self._box_tools is not None:  # the box's tool for this code, before the sentence's audio
                await self._box_tools.on_action(message.code)
        elif isinstance(message, Sentiment):
            self._reply.sentiment(message.tenths)
        elif isinstance(message, Transcript):
            if message.text:
                await self._json(framing.stt(self._session, message.text))
        elif isinstance(message, Welcome):
            self._session = message.session_id
            await self._json(self._channel.hello_reply(
                framing.hello_reply(message.session_id, self._set.sample_rate, self._set.frame_ms)))
            if self._box_tools is not None:
                self._box_tools.start(self._device_id)
        elif isinstance(message, Error):
            await self._error(message)
        elif isinstance(message, ListenState):
            if message.state == ListenState.WOKEN:  # the box shows it as what was heard
                await self._json(framing.stt(self._session, message.word.replace("_", " ")))
        # VadEvent, Pong, ReadingAck and the expression packets it did not ask for: nothing to say.

    async def _error(self, error: Error) -> None:
        code = CLOSE_CODES.get(error.code)
        if code is not None:
            await self._close(code, f"{error.code}: {error.text}")
        elif error.code in ALERT_CODES:
            log.warning("%s: %s shown on the box: %s", self.peer, error.code, error.text)
            await self._json(framing.alert(self._session, "Error", error.text[:200], "sad"))
        # Other codes (bad-audio, rate-limited...): serve_device has logged them; the session goes on.

    async def _close(self, code: int, reason: str) -> None:
        if not self._closed:
            self._closed = True
            await self._channel.close(code, reason, goodbye=not self._box_left)

    async def close(self, reason: str = "") -> None:
        if self._box_tools is not None:
            await self._box_tools.close()
        await self._close(1000, reason)

