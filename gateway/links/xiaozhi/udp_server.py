"""The one UDP socket that carries every xiaozhi box's audio (MQTT+UDP transport).

A datagram is routed by the ssrc in its header to the box session that was given that ssrc in
its hello reply; the session checks the sequence number and the key and learns the box's address
(gateway/links/xiaozhi/mqtt_channel.py). Datagrams that name no session (before the hello, after a
goodbye, or not ours) and malformed ones are dropped here with a log line naming the sender;
the log is thinned out (the first ten per sender reason, then every thousandth) so a flood cannot
fill the disk.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Callable

from firmware_protocol import ProtocolError
from gateway.links.xiaozhi.udp_audio import AudioHeader, parse_header

log = logging.getLogger(__name__)

Address = tuple[str, int]
Route = Callable[[AudioHeader, bytes, Address], None]


class DropLog:
    """Counts dropped datagrams; logs the first ten and then every thousandth."""

    def __init__(self) -> None:
        self.dropped = 0

    def drop(self, who: str, reason: str) -> None:
        self.dropped += 1
        if self.dropped <= 10 or self.dropped % 1000 == 0:
            log.warning("%s: datagram dropped (%d so far): %s", who, self.dropped, reason)


class UdpAudioServer(asyncio.DatagramProtocol):
    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self._routes: dict[int, Route] = {}
        self._transport: asyncio.DatagramTransport | None = None
        self.unrouted = DropLog()

    async def start(self) -> None:
        """Bind; raises OSError when the port is taken."""
        loop = asyncio.get_running_loop()
        transport, _ = await loop.create_datagram_endpoint(lambda: self, local_addr=(self.host, self.port))
        self._transport = transport
        self.port = transport.get_extra_info("sockname")[1]
        log.info("xiaozhi UDP audio listening on %s:%d", self.host, self.port)

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()
            self._transport = None

    def new_ssrc(self) -> int:
        while True:
            ssrc = secrets.randbits(32)
            if ssrc and ssrc not in self._routes:
                return ssrc

    def register(self, ssrc: int, route: Route) -> None:
        self._routes[ssrc] = route

    def unregister(self, ssrc: int) -> None:
        self._routes.pop(ssrc, None)

    def send(self, datagram: bytes, address: Address) -> None:
        if self._transport is not None:
            self._transport.sendto(datagram, address)

    # -- asyncio.DatagramProtocol ------------------------------------------------------------------
    def datagram_received(self, data: bytes, addr: Address) -> None:
        who = f"xiaozhi udp {addr[0]}:{addr[1]}"
        try:
            header = parse_header(data)
        except ProtocolError as exc:
            self.unrouted.drop(who, f"{exc.code}: {exc.text}")
            return
        route = self._routes.get(header.ssrc)
        if route is None:
            self.unrouted.drop(who, f"ssrc {header.ssrc:08x} belongs to no session (no hello over MQTT yet, "
                                    "or after its goodbye)")
            return
        route(header, data, addr)

    def error_received(self, exc: Exception) -> None:  # an ICMP error for an earlier send
        log.info("xiaozhi udp: %s", exc)
