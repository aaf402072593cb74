"""A xiaozhi box on MQTT + UDP as a `BoxChannel`: JSON over the broker, Opus in AES-CTR datagrams.

What the firmware does (78/xiaozhi-esp32 main/protocols/mqtt_protocol.cc): it publishes its JSON
to its `publish_topic` and never subscribes (the gateway's messages reach it on its
`subscribe_topic` because the broker pushes them: mqtt_udp.py). Its hello (`transport: "udp"`) is
answered with a `udp` section {server, port, encryption: "aes-128-ctr", key, nonce}: a fresh
random key and an ssrc per session (udp_audio.py). Audio datagrams are checked in this order:
header, the sender (once the box's address is known, datagrams from any other are dropped: the
box keeps one socket per audio channel), sequence (a number not above the last accepted one is a
replay or out of order: dropped), then the key (the payload must decrypt to a mono Opus packet of
the hello's frame duration; AES-CTR has no integrity check, so about 1 in 70 datagrams under a
wrong key still passes and is decoded as noise), and only then does the address count: the box's
is learned from the first datagram that passes. Replies go to it, one sequence number each. The
firmware plays audio only in its Speaking state, entered on `tts start`; that message takes the
broker's way and the audio the direct one, so a reply's first datagram waits `TTS_LEAD_S` after
its `tts start` (once per reply, not per sentence). A
`goodbye` either way ends the session; every drop is logged with the box's id and the reason.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections import deque
from collections.abc import Callable
from typing import Any

from firmware_protocol import ProtocolError
from gateway.links.base import LinkClosed
from gateway.links.xiaozhi import framing
from gateway.links.xiaozhi.udp_audio import KEY_BYTES, AudioHeader, new_nonce, open_payload, opus_packet_ms, seal
from gateway.links.xiaozhi.udp_server import Address, DropLog, UdpAudioServer

log = logging.getLogger(__name__)

Publish = Callable[[bytes], None]  # one JSON message to the box's subscribe_topic
TTS_LEAD_S = 0.15  # `tts start` through the broker before the reply's first datagram


def mac_of(device_id: str) -> str:
    """`xiaozhi-aabbccddeeff` -> `aa:bb:cc:dd:ee:ff`."""
    hexes = device_id.removeprefix("xiaozhi-")
    return ":".join(hexes[i : i + 2] for i in range(0, len(hexes), 2))


class MqttUdpChannel:
    version = 3  # the firmware's MQTT hello says version 3; its datagrams have their own header

    def __init__(self, device_id: str, publish: Publish, udp: UdpAudioServer, udp_host: str,
                 on_closed: Callable[["MqttUdpChannel"], None], inbox_items: int = 256,
                 tts_lead_s: float = TTS_LEAD_S) -> None:
        self.device_id = device_id
        self.mac = mac_of(device_id)
        self.client_id = ""
        self.token = ""  # the broker checked the box's login (username = device id, password = token)
        self.user_agent = ""
        self.peer = f"xiaozhi mqtt {device_id}"
        self._publish = publish
        self._udp = udp
        self._udp_host = udp_host
        self._on_closed = on_closed
        self._inbox: deque[str | bytes | ProtocolError] = deque()
        self._inbox_items = inbox_items
        self._ready = asyncio.Event()
        self._ended: str | None = None
        self._closed = False
        self._session = ""
        self._key = secrets.token_bytes(KEY_BYTES)
        self._ssrc = udp.new_ssrc()
        self._nonce = new_nonce(self._ssrc)
        self._frame_ms = 60.0  # the box's microphone frames (its hello's audio_params)
        self._address: Address | None = None
        self._remote_seq = 0
        self._local_seq = 0
        self.drops = DropLog()
        self._unsent = 0
        self._tts_lead_s = tts_lead_s
        self._audio_after = 0.0  # loop time before which no reply datagram goes out

    # ---- inbound ----------------------------------------------------------------------------
    def deliver(self, item: str | bytes | ProtocolError) -> None:
        if len(self._inbox) >= self._inbox_items:
            self.drops.drop(self.peer, "inbox full: the session falls behind")
            return
        self._inbox.append(item)
        self._ready.set()

    def end(self, reason: str) -> None:
        """The box is gone (left the broker, a new hello replaced this session)."""
        if self._ended is None:
            self._ended = reason
        self._ready.set()

    def opening_error(self) -> ProtocolError | None:
        return None

    async def receive(self) -> str | bytes | ProtocolError:
        while not self._inbox:
            if self._ended is not None:
                raise LinkClosed(self._ended)
            self._ready.clear()
            await self._ready.wait()
        return self._inbox.popleft()

    def check_hello(self, msg: dict[str, Any]) -> None:
        if msg.get("transport", "udp") != "udp":
            raise ProtocolError("malformed-message", f"hello over MQTT with transport {msg.get('transport')!r} (expected \"udp\")")
        params = msg.get("audio_params") if isinstance(msg.get("audio_params"), dict) else {}
        frame_ms = params.get("frame_duration", 60)
        if not isinstance(frame_ms, int) or isinstance(frame_ms, bool) or frame_ms not in (10, 20, 40, 60, 80, 100, 120):
            raise ProtocolError("unsupported-audio-format", f"microphone frame_duration {frame_ms!r} is not an Opus frame duration")
        self._frame_ms = frame_ms

    def hello_reply(self, reply: dict[str, Any]) -> dict[str, Any]:
        self._session = str(reply.get("session_id", ""))
        self._udp.register(self._ssrc, self._datagram)
        return {**reply, "transport": "udp",
                "udp": {"server": self._udp_host, "port": self._udp.port, "encryption": "aes-128-ctr",
                        "key": self._key.hex(), "nonce": self._nonce.hex()}}

    def _datagram(self, header: AudioHeader, data: bytes, address: Address) -> None:
        where = f"{self.peer} from {address[0]}:{address[1]}"
        if self._address is not None and address != self._address:
            self.drops.drop(where, f"not the box's address {self._address[0]}:{self._address[1]} (learned from its first datagram)")
            return
        if header.sequence <= self._remote_seq:
            self.drops.drop(where, f"sequence {header.sequence} is not above the last accepted {self._remote_seq} "
                                   "(replayed or out of order)")
            return
        packet = open_payload(self._key, data)
        if opus_packet_ms(packet) != self._frame_ms:
            self.drops.drop(where, f"does not decrypt to a {self._frame_ms:g} ms Opus packet (wrong key, or not this box)")
            return
        if header.sequence != self._remote_seq + 1 and self._remote_seq:
            log.debug("%s: sequence %d after %d (%d datagrams lost)", where, header.sequence, self._remote_seq,
                      header.sequence - self._remote_seq - 1)
        self._remote_seq = header.sequence
        if self._address is None:
            log.info("%s: audio from %s:%d", self.peer, address[0], address[1])
            self._address = address
        self.deliver(packet)

    # ---- outbound ---------------------------------------------------------------------------
    async def send_json(self, msg: dict[str, Any]) -> None:
        if self._closed:
            raise LinkClosed("the session ended")
        self._publish(framing.dump(msg).encode())
        if msg.get("type") == "tts" and msg.get("state") == "start":
            self._audio_after = asyncio.get_running_loop().time() + self._tts_lead_s

    async def send_audio(self, packet: bytes, timestamp_ms: int) -> None:
        if self._closed:
            raise LinkClosed("the session ended")
        if self._address is None:  # the box's address is known from its first audio datagram
            self._unsent += 1
            if self._unsent == 1:
                log.warning("%s: reply audio dropped: no audio datagram from the box yet, so its address is unknown", self.peer)
            return
        wait = self._audio_after - asyncio.get_running_loop().time()
        if wait > 0:  # the box enters its Speaking state on the tts start sent just before
            await asyncio.sleep(wait)
        self._local_seq += 1
        self._udp.send(seal(self._key, self._nonce, packet, timestamp_ms, self._local_seq), self._address)

    async def close(self, code: int, reason: str, goodbye: bool = True) -> None:
        if self._closed:
            return
        self._closed = True
        self._udp.unregister(self._ssrc)
        if code != 1000:
            log.warning("%s: session closed: %s", self.peer, reason)
        if goodbye:
            try:
                self._publish(framing.dump({"session_id": self._session, "type": "goodbye"}).encode())
            except LinkClosed:
                pass  # the broker is gone: the box's session ends with it
        self.end(reason or "closed")
        self._on_closed(self)
