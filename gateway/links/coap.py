"""CoAP device link on aiocoap (UDP): resources per device, observe for downlink events.

Resources (PROTOCOL.md, "CoAP"), with `D` the device id:

- `POST /gw/D/up`   one message in the payload (large audio via block-wise transfer, Block1).
  Unless D observes its downlink, the response (2.04) carries, in byte-stream framing (COBS +
  CRC, several frames), what the gateway answered right away, e.g. Welcome or ReadingAck.
- `GET /gw/D/down`  with Observe: each notification carries the next bytes (at most 1000) of the
  downlink byte stream (COBS + CRC frames, which may be split across notifications).

A Hello always starts a new session for D (a device that rebooted just says Hello again); it
replaces D's current session only once it is welcomed (a refused Hello leaves D's session alone).
Every other request carries the session token, the Welcome's session_id, as `?s=<token>`
(coap_resources.py checks it). A session with no request from D (POST up, GET or observe of
down) for `session_idle_s` is closed, like a dropped WebSocket: D is offline in the registry
until its next Hello. With `limits` (gateway/links/limits.py, shared with the WebSocket link) a
Hello takes a session slot of its address (the response is Error too-many-sessions when there
is none), and the session's logins and readings are limited per address. The per-address state
is CoAP's own (keyed `coap <address>`): a UDP source address can be forged, so Hellos forged
from a WebSocket device's address count against CoAP's quota there, not that device's.

In cluster mode, when another gateway takes D over (D said Hello there: gateway/devices/
session_lease.py), D's session here ends without another byte: its observation gets a last
notification 4.01 `lease-lost` and every later request with its token is answered 4.01
`lease-lost` (until D says Hello here again), so the device says Hello again.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable

import aiocoap

from aiocoap.util import hostportsplit

from firmware_protocol import Error, Hello, Message, ProtocolError, Welcome, encode_stream_frame
from gateway.links.base import ConnectionHandler, LinkClosed, LinkServices, Roaming
from gateway.links.coap_resources import GatewayResources, refusal
from gateway.links.limits import GuardedConnection, LogThrottle, PeerLimits

log = logging.getLogger(__name__)

PROCESS_WAIT_S = 2.0  # how long a POST waits for the session to answer before responding
HELLO_WAIT_S = 10.0  # a Hello's response waits for the Welcome: it carries the session token
INBOX_MESSAGES = 256  # uplink messages waiting per session; a POST beyond them is answered 5.03 busy


class CoapDeviceConnection(Roaming):
    def __init__(self, device_id: str, peer: str, outbox_bytes: int = 1 << 20,
                 on_welcome: Callable[["CoapDeviceConnection"], None] | None = None,
                 on_lease_lost: Callable[["CoapDeviceConnection"], None] | None = None) -> None:
        self.device_id = device_id
        self.outbox_bytes = outbox_bytes  # downlink bytes kept for a device that fetches nothing
        self.address = peer
        self.peer = f"coap {peer} ({device_id})"
        self.token: str | None = None  # the session token: the session_id of the Welcome sent
        self._on_welcome = on_welcome
        self._on_lease_lost = on_lease_lost
        self.lease_lost_why: str | None = None  # set once another gateway took the device over
        self._inbox: deque[Message | ProtocolError] = deque()
        self.outbox = bytearray()  # byte-stream frames not fetched yet
        self._wake = asyncio.Event()
        self.idle = asyncio.Event()  # set while the session waits for input with nothing queued
        self.observers: set = set()
        self.observed = asyncio.Event()  # set once a device observes its downlink
        self._closed: str | None = None
        self.dropped = 0  # downlink frames dropped: nobody fetched them
        self.dropped_up = 0  # uplink messages refused 5.03 busy: the session's inbox was full
        self.last_heard = time.monotonic()  # the device's last request (up, down or observe)

    def touch(self) -> None:
        self.last_heard = time.monotonic()

    def deliver(self, item: Message | ProtocolError) -> bool:
        """Queue one uplink message for the session; False (nothing queued) when its inbox is full."""
        if len(self._inbox) >= INBOX_MESSAGES:
            self.dropped_up += 1
            return False
        self.idle.clear()
        self._inbox.append(item)
        self._wake.set()
        return True

    def end(self, reason: str) -> None:
        if self._closed is None:
            self._closed = reason
        self._wake.set()
        self.idle.set()  # nothing more will be answered: a waiting POST responds now

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
        if isinstance(message, Welcome) and self.token is None:
            self.token = message.session_id  # from now on every request must carry it
            if self._on_welcome is not None:
                self._on_welcome(self)
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
        self.end_observations(f"session closed ({reason or 'closed'}); send Hello")

    async def lease_lost(self, text: str) -> None:
        """Another gateway serves the device now: nothing queued goes out, the observation ends
        with 4.01 `lease-lost`, and so does every later request with this session's token."""
        self.lease_lost_why = text
        self.end(f"lease-lost: {text}")
        self.outbox.clear()
        if self._on_lease_lost is not None:
            self._on_lease_lost(self)
        for observation in list(self.observers):
            observation.trigger(refusal(aiocoap.UNAUTHORIZED, "lease-lost", f"{text}; send Hello"), is_last=True)
        self.observers.clear()


class CoapLink:
    name = "coap"

    def __init__(self, host: str, port: int, max_frame_bytes: int = 65536, outbox_bytes: int = 1 << 20,
                 session_idle_s: float = 120.0, limits: PeerLimits | None = None) -> None:
        self.host, self.port = host, port
        self.limits = limits  # the gateway's session caps and per-address limits (shared with the WebSocket)
        self._throttle = LogThrottle(log)
        self.session_idle_s = session_idle_s
        self.outbox_bytes = outbox_bytes
        self.max_frame_bytes = max_frame_bytes
        self.connections: dict[str, CoapDeviceConnection] = {}
        # device -> (token, why) of its session whose lease went (another gateway took the device over)
        self.lost_tokens: dict[str, tuple[str, str]] = {}
        self._handler: ConnectionHandler | None = None
        self._tg: asyncio.TaskGroup | None = None

    async def hello(self, device_id: str, peer: str, hello: Hello) -> CoapDeviceConnection:
        """A new session for D; it replaces D's current one once the Hello is welcomed (the
        registry then closes the old one), so a refused Hello leaves D's session alone."""
        conn = CoapDeviceConnection(device_id, peer, self.outbox_bytes, on_welcome=self._welcomed,
                                    on_lease_lost=self._lease_lost)
        assert self._tg is not None and self._handler is not None
        # UDP source addresses can be forged: CoAP's per-address slots and login lock-outs are its
        # own, so forged Hellos "from" a WebSocket device's address cannot lock that device out
        address = f"coap {hostportsplit(peer)[0]}"
        if self.limits is not None and (why := self.limits.admit(address)) is not None:
            self._throttle.warning(("sessions", address), "%s: too-many-sessions: Hello refused: %s", conn.peer, why)
            await conn.send(Error(code="too-many-sessions", text=why))  # the response carries it
            conn.end(why)
            return conn
        self._tg.create_task(self._run(conn, address), name=f"coap {device_id}")
        await self.deliver(conn, hello, HELLO_WAIT_S)
        return conn

    def _welcomed(self, conn: CoapDeviceConnection) -> None:
        self.connections[conn.device_id] = conn
        self.lost_tokens.pop(conn.device_id, None)

    def _lease_lost(self, conn: CoapDeviceConnection) -> None:
        """Forget the session at once; its token is answered 4.01 lease-lost from now on."""
        if self.connections.get(conn.device_id) is conn:
            del self.connections[conn.device_id]
            if conn.token is not None:
                self.lost_tokens[conn.device_id] = (conn.token, conn.lease_lost_why or "its lease is gone")

    async def deliver(self, conn: CoapDeviceConnection, item: Message | ProtocolError,
                      wait_s: float = PROCESS_WAIT_S) -> bool:
        """Hand one uplink message to the session, then wait (bounded) until it has answered
        what it answers right away (Welcome, ReadingAck...), so the response can carry it.
        False when the session's inbox is full (nothing was queued; the device should retry)."""
        conn.touch()
        if not conn.deliver(item):
            self._throttle.warning(("busy", conn.device_id), "%s: inbox full (%d messages waiting): "
                                   "POST answered 5.03 busy (%d so far)", conn.peer, INBOX_MESSAGES, conn.dropped_up)
            return False
        try:
            await asyncio.wait_for(conn.idle.wait(), wait_s)
        except TimeoutError:
            pass
        return True

    async def _run(self, conn: CoapDeviceConnection, address: str) -> None:
        assert self._handler is not None
        try:
            if self.limits is None:
                await self._handler(conn)
            else:
                await self._handler(GuardedConnection(conn, address, self.limits, self._throttle))
        finally:
            if self.limits is not None:
                self.limits.release(address)
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
        site = GatewayResources(self)
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

