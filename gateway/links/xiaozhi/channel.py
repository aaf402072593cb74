"""How a xiaozhi box's messages travel: the part of its protocol that differs between transports.

`XiaozhiConnection` (connection.py) translates the box's JSON messages and Opus packets to and
from the wire contract, whatever carries them: the WebSocket (ws_channel.py: JSON text frames and
framed binary audio) or MQTT + UDP (mqtt_channel.py: JSON over the broker, AES-CTR datagrams).
"""

from __future__ import annotations

from typing import Any, Protocol

from firmware_protocol import ProtocolError


class BoxChannel(Protocol):
    peer: str  # for every log line about the box
    mac: str  # the box's MAC as it gave it ("" when unknown)
    client_id: str  # its Client-Id (a UUID), "" when unknown
    token: str  # the bearer token it presented ("" when the transport authenticated it)
    user_agent: str
    version: int  # binary protocol version (WebSocket), for the log

    def opening_error(self) -> ProtocolError | None:
        """A problem found before the first message (e.g. an unsupported Protocol-Version header)."""
        ...

    async def receive(self) -> str | bytes | ProtocolError:
        """Next JSON message (text) or Opus packet (bytes), or why a frame was refused. Raises LinkClosed."""
        ...

    def check_hello(self, msg: dict[str, Any]) -> None:
        """Raise ProtocolError when the box's hello does not suit this transport."""
        ...

    def hello_reply(self, reply: dict[str, Any]) -> dict[str, Any]:
        """The server hello with what this transport adds (MQTT: the `udp` section)."""
        ...

    async def send_json(self, msg: dict[str, Any]) -> None:
        """Raises LinkClosed."""
        ...

    async def send_audio(self, packet: bytes, timestamp_ms: int) -> None:
        """One Opus packet to the box. Raises LinkClosed."""
        ...

    async def close(self, code: int, reason: str, goodbye: bool = True) -> None:
        """End the channel; `code` is a WebSocket close code, `goodbye` False when the box said goodbye."""
        ...
