"""A xiaozhi-esp32 box on its MQTT + UDP transport, written from the firmware
(78/xiaozhi-esp32 main/protocols/mqtt_protocol.cc, main/ota.cc, docs/mqtt-udp.md; esp-ml307's
EspMqtt): the OTA answer's `mqtt` section is kept; MQTT 3.1.1 login with its client id, username
and password, clean session, no last will, and **no subscription**; JSON published at QoS 0 to
`publish_topic`; the hello (`transport: "udp"`, version 3) waits 10 s for the server's hello, whose
`udp` section gives the server, port, AES key and nonce; audio datagrams are
`type|flags|len|ssrc|timestamp|sequence` + AES-128-CTR(Opus) with that header as the counter
block (the nonce's type/flags/ssrc kept); incoming datagrams with a sequence not above the last
are dropped, as are ones that are malformed. `goodbye` from the server closes the UDP channel.
Everything else (speaking state, decode queue, messages) is the WebSocket emulator's (box.py).
"""

from __future__ import annotations

import asyncio
import json
import struct
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import paho.mqtt.client as paho

from gateway.audio.pcm import float_to_s16le
from gateway.links.mqtt_client import AsyncPaho
from gateway.links.xiaozhi.udp_audio import open_payload, parse_header, seal
from tests.links.xiaozhi.box import XiaozhiBox


class _Udp(asyncio.DatagramProtocol):
    def __init__(self, box: "XiaozhiMqttBox") -> None:
        self.box = box

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        self.box._datagram(data)


@dataclass
class XiaozhiMqttBox(XiaozhiBox):
    mqtt: dict[str, Any] = field(default_factory=dict)  # the OTA answer's mqtt section, as saved in NVS
    udp: dict[str, Any] = field(default_factory=dict)  # the server hello's udp section
    datagrams_dropped: int = 0  # replayed/old or malformed datagrams from the server
    local_sequence: int = 0
    remote_sequence: int = 0
    goodbyes: int = 0

    def __post_init__(self) -> None:
        super().__post_init__()
        self._mqtt: AsyncPaho | None = None
        self._mcp_queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._mcp_task: asyncio.Task[None] | None = None
        self._udp: asyncio.DatagramTransport | None = None
        self.refused: str | None = None

    async def ota(self, url: str) -> tuple[int, dict[str, Any] | bytes]:
        status, reply = await super().ota(url)
        if status == 200 and isinstance(reply, dict):
            self.mqtt.update(reply.get("mqtt", {}))  # the firmware saves each key it is given
        return status, reply

    # ---- MQTT ----------------------------------------------------------------------------------
    async def connect(self) -> None:
        """Log in to the broker; raises MqttConnectError when refused."""
        m = self.mqtt
        host, _, port = m["endpoint"].rpartition(":")
        self._mqtt = AsyncPaho(m["client_id"], self._on_publish, username=m["username"], password=m.get("password", ""),
                               persistent=False)
        await self._mqtt.connect(host, int(port), keepalive=m.get("keepalive", 240))
        self._mcp_task = asyncio.create_task(self._answer_mcp())

    def _on_publish(self, msg: paho.MQTTMessage) -> None:
        message = json.loads(msg.payload)
        self.messages.append(message)
        self.events.append(message.get("type", "?") + (f":{message['state']}" if "state" in message else ""))
        if message.get("type") == "hello":
            self.udp = message.get("udp", {})
        elif message.get("type") == "goodbye" and message.get("session_id") == self.session_id:
            self.goodbyes += 1
            self._close_udp()  # the firmware closes its audio channel, without a goodbye back
        self._on_json(message)
        if message.get("type") == "mcp":  # the firmware's MCP server answers in order, on its own task
            self._mcp_queue.put_nowait(message.get("payload", {}))
        self._changed.set()

    async def _answer_mcp(self) -> None:
        while True:
            await self._on_mcp(await self._mcp_queue.get())

    async def send_json(self, msg: dict[str, Any]) -> None:
        assert self._mqtt is not None
        self._mqtt.publish(self.mqtt["publish_topic"], json.dumps(msg).encode(), 0)

    async def open(self, hello: dict[str, Any] | None = None, headers: dict[str, str] | None = None) -> dict[str, Any]:
        """OpenAudioChannel: hello over MQTT, the server's hello within 10 s, then the UDP socket."""
        if self._mqtt is None:
            await self.connect()
        self.session_id = ""
        self.udp = {}
        seen = len(self.messages)
        await self.send_json(hello or {"type": "hello", "version": 3, "transport": "udp", "features": {"mcp": True},
                                       "audio_params": {"format": "opus", "sample_rate": 16000, "channels": 1,
                                                        "frame_duration": 60}})
        reply = await self.wait_for(lambda m: m.get("type") == "hello" and self.messages.index(m) >= seen, 10)
        self.local_sequence = self.remote_sequence = 0
        loop = asyncio.get_running_loop()
        self._udp, _ = await loop.create_datagram_endpoint(lambda: _Udp(self),
                                                           remote_addr=(self.udp["server"], self.udp["port"]))
        return reply

    def _close_udp(self) -> None:
        if self._udp is not None:
            self._udp.close()
            self._udp = None

    async def goodbye(self) -> None:
        """CloseAudioChannel(send_goodbye=true)."""
        self._close_udp()
        await self.send_json({"session_id": self.session_id, "type": "goodbye"})

    async def close(self) -> None:
        self._close_udp()
        if self._mcp_task is not None:
            self._mcp_task.cancel()
            await asyncio.gather(self._mcp_task, return_exceptions=True)
            self._mcp_task = None
        if self._mqtt is not None:
            await self._mqtt.disconnect()
            self._mqtt = None

    # ---- UDP audio -----------------------------------------------------------------------------
    def key(self) -> bytes:
        return bytes.fromhex(self.udp["key"])

    def nonce(self) -> bytes:
        return bytes.fromhex(self.udp["nonce"])

    def datagram(self, packet: bytes, timestamp: int = 0, sequence: int | None = None, key: bytes | None = None) -> bytes:
        """One audio datagram as SendAudio makes it (the next sequence number unless given)."""
        if sequence is None:
            self.local_sequence += 1
            sequence = self.local_sequence
        return seal(key or self.key(), self.nonce(), packet, timestamp, sequence)

    def send_datagram(self, data: bytes) -> None:
        assert self._udp is not None
        self._udp.sendto(data)

    def mic_packets(self, audio16k: np.ndarray, silence_s: float = 0.0) -> list[bytes]:
        samples = np.concatenate([audio16k, np.zeros(int(silence_s * 16000), np.float32)])
        return self._encoder.encode(float_to_s16le(samples)) + self._encoder.flush()

    async def say(self, audio16k: np.ndarray, silence_s: float = 0.0, pace: float = 0.0) -> None:
        for i, packet in enumerate(self.mic_packets(audio16k, silence_s)):
            self.send_datagram(self.datagram(packet, i * 60))
            await asyncio.sleep(pace)  # 0: just yield, as the WebSocket emulator does

    def _datagram(self, data: bytes) -> None:
        try:
            header = parse_header(data)
        except Exception:
            self.datagrams_dropped += 1
            return
        if header.sequence <= self.remote_sequence:
            self.datagrams_dropped += 1  # "Received duplicate/old audio sequence"
            return
        self.remote_sequence = header.sequence
        self.events.append("audio")
        self._on_audio(open_payload(self.key(), data), asyncio.get_running_loop().time())
        self._changed.set()


def header_fields(datagram: bytes) -> tuple[int, int, int, int, int, int]:
    return struct.unpack(">BBHIII", datagram[:16])
