"""CoAP device link on aiocoap (UDP): resources per device, observe for downlink events.

Resources (PROTOCOL.md, "CoAP"), with `D` the device id:

- `POST /gw/D/up`   one message in the payload (large audio via block-wise transfer, Block1).
  Unless D observes its downlink, the response (2.04) carries, in byte-stream framing (COBS +
  CRC, several frames), what the gateway answered right away, e.g. Welcome or ReadingAck.
- `GET /gw/D/down`  with Observe: each notification carries the next bytes (at most 1000) of the
  downlink byte stream (COBS + CRC frames, which may be split across notifications).

A Hello always starts a new session for D (a device that rebooted just says Hello again).
A session with no request from D (POST up, GET or observe of down) for `session_idle_s` is
closed, like a dropped WebSocket: D is offline in the registry until its next Hello.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections import deque

import aiocoap
from aiocoap import error as coap_error
from aiocoap import interfaces, resource

from firmware_protocol import Hello, Message, ProtocolError, decode, encode_stream_frame
from firmware_protocol.messages import DEVICE_ID_PATTERN
from gateway.links.base import ConnectionHandler, LinkClosed, LinkServices

log = logging.getLogger(__name__)

PROCESS_WAIT_S = 2.0  # how long a POST waits for the session to answer before responding
NOTIFICATION_BYTES = 1000  # fits one datagram: libcoap clients drop block-wise notifications


class CoapDeviceConnection:
    def __init__(self, device_id: str, peer: str, outbox_bytes: int = 1 << 20) -> None:
        self.device_id = device_id
        self.outbox_bytes = outbox_bytes  # downlink bytes kept for a device that fetches nothing
        self.peer = f"coap {peer} ({device_id})"
        self._inbox: deque[Message | ProtocolError] = deque()
        self.outbox = bytearray()  # byte-stream frames not fetched yet
        self._wake = asyncio.Event()
        self.idle = asyncio.Event()  # set while the session waits for input with nothing queued
        self.observers: set = set()
        self.observed = asyncio.Event()  # set once a device observes its downlink
        self._closed: str | None = None
        self.dropped = 0
        self.last_heard = time.monotonic()  # the device's last request (up, down or observe)

    def touch(self) -> None:
        self.last_heard = time.monotonic()

    def deliver(self, item: Message | ProtocolError) -> None:
        self.idle.clear()
        self._inbox.append(item)
        self._wake.set()

    def end(self, reason: str) -> None:
        if self._closed is None:
            self._closed = reason
        self._wake.set()

    async def receive(self) -> Message | ProtocolError:
        while not self._inbox:
            if self._closed is not None:
                raise LinkClosed(self._closed)
            self.idle.set()
            self._wake.clear()
            await self._wake.wait()
        return self._inbox.popleft()

    async def send(self, message: Message) -> None:
        if self._closed is not None:
            raise LinkClosed(self._closed)
        if len(self.outbox) >= self.outbox_bytes:
            self.dropped += 1  # nobody fetches: drop new frames, count them
            return
        self.outbox += encode_stream_frame(message)
        self.notify()

    def notify(self) -> None:
        for observation in list(self.observers):
            observation.trigger()

    def end_observations(self, why: str) -> None:
        """Tell observing devices the session is gone (4.04 ends a CoAP observation)."""
        for observation in list(self.observers):
            observation.trigger(aiocoap.Message(code=aiocoap.NOT_FOUND, payload=why.encode()), is_last=True)
        self.observers.clear()

    def drain(self, limit: int | None = None) -> bytes:
        """The next bytes of the downlink stream (at most `limit`); frames may be split."""
        size = len(self.outbox) if limit is None else min(limit, len(self.outbox))
        data = bytes(self.outbox[:size])
        del self.outbox[:size]
        return data

    async def close(self, reason: str = "") -> None:
        self.end(reason or "closed")


class DeviceResources(resource.Resource, interfaces.ObservableResource, resource.PathCapable):
    """Everything under /gw/: <device id>/up and <device id>/down."""

    def __init__(self, link: "CoapLink") -> None:
        super().__init__()
        self._link = link

    def _split(self, request: aiocoap.Message) -> tuple[str, str]:
        path = request.opt.uri_path
        if len(path) != 2 or path[1] not in ("up", "down") or not re.fullmatch(DEVICE_ID_PATTERN, path[0]):
            raise coap_error.NotFound()
        return path[0], path[1]

    async def render(self, request: aiocoap.Message) -> aiocoap.Message:
        device_id, channel = self._split(request)
        if channel == "up" and request.code == aiocoap.POST:
            conn = await self._link.uplink(device_id, str(request.remote.hostinfo), request.payload)
            # An observing device gets everything by notification, so the stream stays in order.
            return aiocoap.Message(code=aiocoap.CHANGED, payload=b"" if conn.observers else conn.drain())
        if channel == "down" and request.code == aiocoap.GET:
            conn = self._link.connections.get(device_id)
            if conn is None:
                return aiocoap.Message(code=aiocoap.CONTENT, payload=b"")
            conn.touch()  # a fetch or an observe (re-)registration keeps the session alive
            payload = conn.drain(NOTIFICATION_BYTES)
            if conn.outbox:  # the rest goes in the next notification(s)
                asyncio.get_running_loop().call_soon(conn.notify)
            return aiocoap.Message(code=aiocoap.CONTENT, payload=payload)
        raise coap_error.UnallowedMethod()

    async def add_observation(self, request: aiocoap.Message, serverobservation) -> None:
        device_id, channel = self._split(request)
        conn = self._link.connections.get(device_id)
        if channel != "down" or conn is None:
            return  # observe only the downlink of a device that said Hello
        conn.observers.add(serverobservation)
        conn.observed.set()
        serverobservation.accept(lambda: conn.observers.discard(serverobservation))


class CoapLink:
    name = "coap"

    def __init__(self, host: str, port: int, max_frame_bytes: int = 65536, outbox_bytes: int = 1 << 20,
                 session_idle_s: float = 120.0) -> None:
        self.host, self.port = host, port
        self.session_idle_s = session_idle_s
        self.outbox_bytes = outbox_bytes
        self.max_frame_bytes = max_frame_bytes
        self.connections: dict[str, CoapDeviceConnection] = {}
        self._handler: ConnectionHandler | None = None
        self._tg: asyncio.TaskGroup | None = None

    async def uplink(self, device_id: str, peer: str, payload: bytes) -> CoapDeviceConnection:
        item: Message | ProtocolError
        if len(payload) > self.max_frame_bytes:
            item = ProtocolError("frame-too-large", f"payload of {len(payload)} bytes exceeds {self.max_frame_bytes}")
        else:
            try:
                item = decode(payload)
            except ProtocolError as exc:
                item = exc
        conn = self.connections.get(device_id)
        if conn is None or isinstance(item, Hello):
            if conn is not None:
                conn.end("a new Hello started a new session")
            conn = self.connections[device_id] = CoapDeviceConnection(device_id, peer, self.outbox_bytes)
            assert self._tg is not None and self._handler is not None
            self._tg.create_task(self._run(conn), name=f"coap {device_id}")
        conn.touch()
        conn.deliver(item)
        try:  # answer in the response what the session says right away (Welcome, ReadingAck...)
            await asyncio.wait_for(conn.idle.wait(), PROCESS_WAIT_S)
        except TimeoutError:
            pass
        return conn

    async def _run(self, conn: CoapDeviceConnection) -> None:
        assert self._handler is not None
        try:
            await self._handler(conn)
        finally:
            if self.connections.get(conn.device_id) is conn:
                del self.connections[conn.device_id]

    async def _expire_idle(self) -> None:
        """Close sessions whose device sent no request for session_idle_s (checked 4x as often)."""
        while True:
            await asyncio.sleep(min(self.session_idle_s / 4, 5.0))
            now = time.monotonic()
            for device_id, conn in list(self.connections.items()):
                if now - conn.last_heard >= self.session_idle_s:
                    log.info("%s: no request or observe refresh for %.0f s (coap.session_idle_s); session closed",
                             conn.peer, now - conn.last_heard)
                    del self.connections[device_id]  # its next request starts a new session (Hello first)
                    conn.end(f"idle for {self.session_idle_s:g} s")
                    conn.end_observations(f"session ended after {self.session_idle_s:g} s idle; send Hello")

    async def serve(self, handler: ConnectionHandler, ready: asyncio.Event | None = None,
                    services: LinkServices | None = None) -> None:
        self._handler = handler
        site = resource.Site()
        site.add_resource(["gw"], DeviceResources(self))
        async with asyncio.TaskGroup() as tg:
            self._tg = tg
            try:
                # UDP only: aiocoap would otherwise also open CoAP over TCP, TLS and WebSocket
                # (port 8683) listeners that nobody configured or documented.
                context = await aiocoap.Context.create_server_context(
                    site, bind=(self.host, self.port), transports=["udp6"]
                )
            except OSError as exc:  # the gateway's start-up names the port, its key and its holder
                log.error("coap: cannot listen on udp %s:%d (%s); change coap.port",
                          self.host, self.port, exc.strerror or exc)
                raise
            try:
                log.info("coap: listening on udp %s:%d", self.host, self.port)
                tg.create_task(self._expire_idle(), name="coap-idle")
                if ready is not None:
                    ready.set()
                await asyncio.Future()  # serve until cancelled
            finally:
                await context.shutdown()

