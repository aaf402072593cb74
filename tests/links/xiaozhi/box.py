"""A xiaozhi-esp32 box emulator, written from the firmware (78/xiaozhi-esp32: main/ota.cc,
main/protocols/websocket_protocol.cc, protocol.cc, main/application.cc):

* OTA: POST the system info JSON with Device-Id / Client-Id / User-Agent / Activation-Version;
  keep `websocket.url` / `websocket.token` from the reply.
* WebSocket: headers Authorization (`Bearer ` added), Protocol-Version, Device-Id, Client-Id;
  send the JSON hello, wait 10 s for the server's hello (its audio_params set the decoder).
* Microphone: 16 kHz mono Opus in 60 ms packets (framed per protocol version 1/2/3).
* MCP (main/mcp_server.cc): answers initialize, tools/list in pages (`nextCursor` = the name of
  the next page's first tool) and tools/call (`{content: [{type: text, text}], isError}` or
  `{error: {message}}`), recording each call.
* Incoming audio is decoded only while Speaking (between `tts start` and `tts stop`), as the
  firmware drops it otherwise; its decode queue holds 2.4 s (40 x 60 ms), the rest is dropped.
* `tts stop` in `auto` listening mode drops what is still queued and not yet played on firmware
  1.9 and 2.0 (Listening -> AudioService::EnableVoiceProcessing(true) -> ResetDecoder; from 2.2
  the firmware waits for its playback queue to drain first): `truncated_ms` adds up what such a
  box would have cut (by this box's clock: a busy test machine adds to it), `reply_pcm` keeps it.

The protocol pieces (OTA request, headers, hello, framing) are the package's
gateway/links/xiaozhi/box_side.py, shared with `gateway bench --xiaozhi`.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from gateway.audio.opus import OpusDecoder, OpusEncoder
from gateway.audio.pcm import float_to_s16le, s16le_to_float
from gateway.links.xiaozhi import box_side, framing
from gateway.links.xiaozhi.box_side import http_post

__all__ = ["BoxClosed", "XiaozhiBox", "default_tools", "http_post", "kept_client_id"]


class BoxClosed(Exception):
    """The gateway closed the WebSocket while the box waited for something."""


QUEUE_PACKETS = 40  # MAX_DECODE_PACKETS_IN_QUEUE = 2400 ms / 60 ms


def kept_client_id(mac: str) -> str:
    """The Client-Id of the box with this MAC: a real box makes a random UUID once and keeps it
    (Board::GetUuid, NVS), so every emulator of one MAC is the same box to the gateway."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"xiaozhi-box:{mac.lower()}"))


def _tool(name: str, description: str, **properties: Any) -> dict[str, Any]:
    return {"name": name, "description": description,
            "inputSchema": {"type": "object", "properties": properties, "required": list(properties)}}


def default_tools() -> list[dict[str, Any]]:
    """The stock firmware's common tools plus an Otto robot's motion tool."""
    return [_tool("self.get_device_status", "Current status of the device (volume, screen, battery)."),
            _tool("self.audio_speaker.set_volume", "Set the speaker volume (0-100).", volume={"type": "integer"}),
            _tool("self.screen.set_brightness", "Set the screen brightness (0-100).", brightness={"type": "integer"}),
            _tool("self.otto.action", "Perform a robot motion (walk, hand_wave, swing...).", action={"type": "string"})]


@dataclass
class XiaozhiBox:
    mac: str = "a0:b1:c2:d3:e4:f5"
    client_id: str = ""  # "": the one this MAC's box keeps (made once, kept in NVS: a UUID derived from the MAC here)
    version: int = 1  # binary protocol version (the OTA reply may not set it: the firmware's default is 1)
    firmware: str = "1.9.2"
    ws_url: str = ""
    token: str = ""
    ws: ClientConnection | None = None
    messages: list[dict[str, Any]] = field(default_factory=list)
    speaking: bool = False
    reply_pcm: bytearray = field(default_factory=bytearray)  # decoded reply audio (all replies)
    packets_received: int = 0
    packets_dropped: int = 0  # arrived while not Speaking (the firmware drops them)
    queue_peak: int = 0  # most packets ahead of real-time playback (the firmware's queue)
    server_rate: int = 24000
    server_frame_ms: int = 60
    session_id: str = ""
    first_audio_at: float | None = None
    events: list[str] = field(default_factory=list)  # in arrival order: "tts:start", "stt", "llm", "audio"...
    activation: dict[str, Any] | None = None  # the OTA answer's activation section (code, challenge...)
    tools: list[dict[str, Any]] = field(default_factory=default_tools)
    tools_per_page: int = 2  # the firmware pages by ~8 kB; small pages here test the cursor
    tool_faults: dict[str, str] = field(default_factory=dict)  # tool name -> "error" | "is_error" | "hang"
    tool_calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # (name, arguments) in order
    mcp_methods: list[str] = field(default_factory=list)  # every JSON-RPC method the gateway sent
    volume: int = 70
    listening_mode: str = ""  # of the last `listen start`
    truncated_ms: float = 0.0  # reply audio queued, not yet played, when `tts stop` came in auto mode

    def __post_init__(self) -> None:
        self.client_id = self.client_id or kept_client_id(self.mac)
        self._encoder = OpusEncoder(16000, 60)
        self._decoder: OpusDecoder | None = None
        self._changed = asyncio.Event()
        self._reader: asyncio.Task[None] | None = None
        self._play_ends = 0.0

    # ---- bootstrap ------------------------------------------------------------------------
    def system_info(self) -> dict[str, Any]:
        return box_side.system_info(self.mac, self.client_id, self.firmware)

    def ota_headers(self) -> dict[str, str]:
        return box_side.ota_headers(self.mac, self.client_id, self.firmware)

    async def ota(self, url: str) -> tuple[int, dict[str, Any] | bytes]:
        status, body = await http_post(url, json.dumps(self.system_info()).encode(), self.ota_headers())
        if status != 200:
            return status, body
        reply = json.loads(body)
        for key, value in reply.get("websocket", {}).items():  # the firmware saves each key
            setattr(self, {"url": "ws_url", "token": "token", "version": "version"}[key], value)
        self.activation = reply.get("activation")
        return status, reply

    async def activate(self, ota_url: str, serial_number: str = "") -> int:
        """One `POST <ota_url>/activate` (Ota::Activate): `{}` without an eFuse serial number, else
        the challenge with an HMAC the gateway cannot check (the key is in the box's eFuse)."""
        assert self.activation is not None, "the OTA answer had no activation section"
        body = {} if not serial_number else {"algorithm": "hmac-sha256", "serial_number": serial_number,
                                             "challenge": self.activation["challenge"], "hmac": "00" * 32}
        url = ota_url + ("activate" if ota_url.endswith("/") else "/activate")
        headers = {**self.ota_headers(), "Activation-Version": "2" if serial_number else "1"}
        status, _ = await http_post(url, json.dumps(body).encode(), headers)
        return status

    # ---- the audio channel ----------------------------------------------------------------
    async def open(self, hello: dict[str, Any] | None = None, headers: dict[str, str] | None = None) -> dict[str, Any]:
        h = {**box_side.ws_headers(self.mac, self.client_id, self.version, self.token), **(headers or {})}
        self.ws = await connect(self.ws_url, additional_headers=h, compression=None)
        self._reader = asyncio.create_task(self._read())
        await self.send_json(hello or box_side.hello(self.version))
        return await self.wait_for(lambda m: m.get("type") == "hello", 10)

    async def close(self) -> None:
        if self.ws is not None:
            await self.ws.close()
        if self._reader is not None:
            await asyncio.gather(self._reader, return_exceptions=True)

    async def send_json(self, msg: dict[str, Any]) -> None:
        assert self.ws is not None
        await self.ws.send(json.dumps(msg))

    async def listen(self, mode: str = "auto") -> None:
        self.listening_mode = mode
        await self.send_json({"session_id": self.session_id, "type": "listen", "state": "start", "mode": mode})

    async def stop_listening(self) -> None:
        await self.send_json({"session_id": self.session_id, "type": "listen", "state": "stop"})

    async def abort(self) -> None:
        self.speaking = False  # the firmware stops playing at once
        await self.send_json({"session_id": self.session_id, "type": "abort"})

    def frame(self, packet: bytes, timestamp: int = 0) -> bytes:
        return framing.encode_audio(packet, self.version, timestamp)

    async def say(self, audio16k: np.ndarray, silence_s: float = 0.0, pace: float = 0.0) -> None:
        """Stream microphone audio (float32 at 16 kHz) as 60 ms Opus packets; `pace` s between packets."""
        assert self.ws is not None
        samples = np.concatenate([audio16k, np.zeros(int(silence_s * 16000), np.float32)])
        packets = self._encoder.encode(float_to_s16le(samples)) + self._encoder.flush()
        for i, packet in enumerate(packets):
            await self.ws.send(self.frame(packet, i * 60))
            await asyncio.sleep(pace)

    # ---- what the box heard -----------------------------------------------------------------
    def of_type(self, kind: str, **match: Any) -> list[dict[str, Any]]:
        return [m for m in self.messages if m.get("type") == kind and all(m.get(k) == v for k, v in match.items())]

    async def wait_for(self, predicate, timeout: float = 20) -> dict[str, Any]:
        async with asyncio.timeout(timeout):
            while True:
                for m in self.messages:
                    if predicate(m):
                        return m
                if self._reader is not None and self._reader.done():
                    assert self.ws is not None
                    raise BoxClosed(f"{self.ws.close_code} {self.ws.close_reason}")
                self._changed.clear()
                await self._changed.wait()

    async def wait_until(self, condition, timeout: float = 20) -> None:
        async with asyncio.timeout(timeout):
            while not condition():
                self._changed.clear()
                await self._changed.wait()

    def reply_audio(self) -> np.ndarray:
        return s16le_to_float(bytes(self.reply_pcm))

    async def _read(self) -> None:
        assert self.ws is not None
        loop = asyncio.get_running_loop()
        try:
            async for data in self.ws:
                if isinstance(data, str):
                    msg = json.loads(data)
                    self.messages.append(msg)
                    self.events.append(msg.get("type", "?") + (f":{msg['state']}" if "state" in msg else ""))
                    self._on_json(msg)
                    if msg.get("type") == "mcp":
                        await self._on_mcp(msg.get("payload", {}))
                else:
                    self.events.append("audio")
                    self._on_audio(data, loop.time())
                self._changed.set()
        except ConnectionClosed:
            pass
        finally:
            self._changed.set()

    def _on_json(self, msg: dict[str, Any]) -> None:
        if msg.get("type") == "hello":
            params = msg.get("audio_params", {})
            self.server_rate = params.get("sample_rate", 24000)
            self.server_frame_ms = params.get("frame_duration", 60)
            self.session_id = msg.get("session_id", "")
            self._decoder = OpusDecoder(self.server_rate)
        elif msg.get("type") == "tts" and msg.get("state") == "start":
            self.speaking = True
        elif msg.get("type") == "tts" and msg.get("state") == "stop":
            self.speaking = False
            if self.listening_mode == "auto":  # firmware 1.9/2.0: ResetDecoder drops the unplayed queue
                self.truncated_ms += max(0.0, self._play_ends - asyncio.get_running_loop().time()) * 1000
                self._play_ends = 0.0

    def _on_audio(self, data: bytes, now: float) -> None:
        self.packets_received += 1
        if not self.speaking or self._decoder is None:
            self.packets_dropped += 1
            return
        payload = data[16:] if self.version == 2 else data[4:] if self.version == 3 else data
        if self.first_audio_at is None:
            self.first_audio_at = now
        frame_s = self.server_frame_ms / 1000
        self._play_ends = max(self._play_ends, now) + frame_s
        queued = round((self._play_ends - now) / frame_s)
        self.queue_peak = max(self.queue_peak, queued)
        if queued > QUEUE_PACKETS:
            self.packets_dropped += 1
            return
        self.reply_pcm += self._decoder.decode(payload)

    # ---- the box's MCP server (main/mcp_server.cc) --------------------------------------------
    async def _reply_mcp(self, rid: int, result: dict[str, Any] | None = None, error: str | None = None) -> None:
        payload: dict[str, Any] = {"jsonrpc": "2.0", "id": rid}
        payload.update({"error": {"message": error}} if error is not None else {"result": result})
        await self.send_json({"session_id": self.session_id, "type": "mcp", "payload": payload})

    async def _on_mcp(self, payload: dict[str, Any]) -> None:
        method, rid, params = payload.get("method", ""), payload.get("id"), payload.get("params") or {}
        self.mcp_methods.append(method)
        if method.startswith("notifications/") or rid is None:
            return
        if method == "initialize":
            await self._reply_mcp(rid, {"protocolVersion": "2024-11-05", "capabilities": {"tools": {}},
                                        "serverInfo": {"name": "bread-compact-wifi", "version": self.firmware}})
        elif method == "tools/list":
            names = [t["name"] for t in self.tools]
            start = names.index(params["cursor"]) if params.get("cursor") in names else 0
            page = self.tools[start:start + self.tools_per_page]
            result: dict[str, Any] = {"tools": page}
            if start + self.tools_per_page < len(self.tools):
                result["nextCursor"] = self.tools[start + self.tools_per_page]["name"]
            await self._reply_mcp(rid, result)
        elif method == "tools/call":
            name, arguments = params.get("name", ""), params.get("arguments") or {}
            self.tool_calls.append((name, arguments))
            self.events.append(f"tool:{name}")
            fault = self.tool_faults.get(name)
            if name not in {t["name"] for t in self.tools}:
                await self._reply_mcp(rid, error=f"Unknown tool: {name}")
            elif fault == "hang":
                return  # a servo stuck: no answer
            elif fault == "error":
                await self._reply_mcp(rid, error="Missing valid argument: volume")
            elif fault == "is_error":
                await self._reply_mcp(rid, {"content": [{"type": "text", "text": "motor overheated"}], "isError": True})
            else:
                if name == "self.audio_speaker.set_volume":
                    self.volume = int(arguments.get("volume", self.volume))
                text = "true" if name != "self.get_device_status" else json.dumps({"audio_speaker": {"volume": self.volume}})
                await self._reply_mcp(rid, {"content": [{"type": "text", "text": text}], "isError": False})
        else:
            await self._reply_mcp(rid, error=f"Method not implemented: {method}")
