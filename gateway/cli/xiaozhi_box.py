"""A real-time-paced xiaozhi box for `gateway bench --xiaozhi`: boots by OTA, then speaks one
utterance per WebSocket session in the `auto` listen mode, as the firmware does.

The microphone sends one 60 ms Opus packet (16 kHz mono) each 60 ms of wall-clock time, once the
packet's audio is "captured" (packet i leaves at start + (i + 1) x 60 ms), the speech and then
silence, until the gateway's `tts start` (the firmware stops its microphone while Speaking in
auto mode). The turn's figure is the time from sending the packet that holds the last speech
sample to the first Opus reply frame; the box then waits for `tts stop`. The protocol pieces are
gateway/links/xiaozhi/box_side.py (shared with the test emulator, tests/links/xiaozhi/box.py).
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from dataclasses import dataclass, field

import numpy as np

from gateway.audio.opus import OpusEncoder
from gateway.audio.pcm import float_to_s16le
from gateway.links.xiaozhi import box_side
from gateway.links.xiaozhi.box_side import MIC_FRAME_MS, MIC_RATE, BoxSocket


class BoxError(Exception):
    """The box could not boot or finish its turn."""


@dataclass
class BoxTurn:
    transcript: str = ""
    first_frame_ms: float | None = None  # last speech packet sent -> first Opus reply frame
    reply_packets: int = 0
    sentences: list[str] = field(default_factory=list)


@dataclass
class PacedBox:
    mac: str
    version: int = 1
    firmware: str = "1.9.2"
    client_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    ws_url: str = ""
    token: str = ""

    async def boot(self, ota_url: str) -> None:
        """The OTA request: where the WebSocket is, and the box's token (open enrolment)."""
        body = json.dumps(box_side.system_info(self.mac, self.client_id, self.firmware)).encode()
        status, payload = await box_side.http_post(ota_url, body, box_side.ota_headers(self.mac, self.client_id, self.firmware))
        websocket = json.loads(payload).get("websocket") if status == 200 else None
        if not websocket:
            raise BoxError(f"OTA {ota_url} answered {status}: {payload[:200]!r}")
        self.ws_url, self.token = websocket["url"], websocket.get("token", "")

    async def turn(self, speech16k: np.ndarray, timeout: float = 60.0) -> BoxTurn:
        """One WebSocket session: hello, `listen start auto`, the speech in real time, the reply."""
        headers = box_side.ws_headers(self.mac, self.client_id, self.version, self.token)
        sock = await BoxSocket.open(self.ws_url, headers, self.version)
        result = BoxTurn()
        try:
            async with asyncio.timeout(timeout):
                await sock.send_json(box_side.hello(self.version, mcp=False))
                frames = aiter(sock)
                hello = await _next_json(frames, "hello")
                session = hello.get("session_id", "")
                await sock.send_json({"session_id": session, "type": "listen", "state": "start", "mode": "auto"})
                speaking = asyncio.Event()
                speech_end: list[float] = []
                async with asyncio.TaskGroup() as tg:
                    mic = tg.create_task(_microphone(sock, speech16k, speaking, speech_end))
                    await _hear(frames, result, speaking, speech_end)
                    mic.cancel()
        except TimeoutError:
            raise BoxError(f"{self.mac}: no complete reply within {timeout:.0f} s") from None
        finally:
            await sock.close()
        return result


async def _next_json(frames, kind: str) -> dict:
    async for msg in frames:
        if isinstance(msg, dict) and msg.get("type") == kind:
            return msg
    raise BoxError(f"the gateway closed the WebSocket before its {kind!r}")


async def _microphone(sock: BoxSocket, speech16k: np.ndarray, speaking: asyncio.Event, speech_end: list[float]) -> None:
    """Speech then silence as 60 ms Opus packets in real time, until the box starts Speaking."""
    encoder = OpusEncoder(MIC_RATE, MIC_FRAME_MS)
    frame = MIC_RATE * MIC_FRAME_MS // 1000
    speech_packets = -(-len(speech16k) // frame)
    padded = np.concatenate([speech16k, np.zeros(speech_packets * frame - len(speech16k), np.float32)])
    silence = float_to_s16le(np.zeros(frame, np.float32))
    start = time.monotonic()
    i = 0
    while not speaking.is_set():
        pcm = float_to_s16le(padded[i * frame:(i + 1) * frame]) if i < speech_packets else silence
        delay = start + (i + 1) * MIC_FRAME_MS / 1000 - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)  # the packet's 60 ms are captured only now
        for packet in encoder.encode(pcm):
            await sock.send_audio(packet, i * MIC_FRAME_MS)
        if i == speech_packets - 1:
            speech_end.append(time.monotonic())
        i += 1


async def _hear(frames, result: BoxTurn, speaking: asyncio.Event, speech_end: list[float]) -> None:
    async for msg in frames:
        if isinstance(msg, bytes):
            if result.first_frame_ms is None and speech_end:
                result.first_frame_ms = (time.monotonic() - speech_end[0]) * 1000
            result.reply_packets += 1
        elif msg.get("type") == "stt":
            result.transcript = msg.get("text", "")
        elif msg.get("type") == "tts" and msg.get("state") == "start":
            speaking.set()
        elif msg.get("type") == "tts" and msg.get("state") == "sentence_start":
            result.sentences.append(msg.get("text", ""))
        elif msg.get("type") == "tts" and msg.get("state") == "stop":
            return
    raise BoxError("the gateway closed the WebSocket before the reply ended")
