"""The CoAP link's resource tree: `/gw/D/up` and `/gw/D/down`, each request bound to D's session.

Every request but a Hello carries the session token, the `session_id` of the Welcome that
answered D's Hello, as the URI query `s=<token>` (PROTOCOL.md, "CoAP"). A request for D's
session with a missing or wrong token is refused (4.01) and logged with the peer; the session
itself is untouched, so D keeps being served. Every 4.xx carries a diagnostic payload,
`<stable code>: <what was wrong and what to do>`. The token of a session another gateway of the
cluster took over is answered 4.01 `lease-lost` (coap.py).
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import re
from typing import TYPE_CHECKING

import aiocoap
from aiocoap import interfaces, resource

from firmware_protocol import Error, Hello, Message, ProtocolError, decode, encode_stream_frame
from firmware_protocol.session_messages import DEVICE_ID_PATTERN

if TYPE_CHECKING:
    from gateway.links.coap import CoapDeviceConnection, CoapLink

log = logging.getLogger("gateway.links.coap")

NOTIFICATION_BYTES = 1000  # fits one datagram: libcoap clients drop block-wise notifications
RESOURCES = "POST /gw/<device id>/up, GET or Observe /gw/<device id>/down"


def refusal(code: aiocoap.numbers.codes.Code, reason: str, text: str) -> aiocoap.Message:
    """A 4.xx with its diagnostic payload: `<stable code>: <text>`."""
    return aiocoap.Message(code=code, payload=f"{reason}: {text}".encode())


def session_token(request: aiocoap.Message) -> str | None:
    for query in request.opt.uri_query:
        key, _, value = query.partition("=")
        if key == "s":
            return value
    return None


def holds_token(conn: "CoapDeviceConnection", token: str | None) -> bool:
    return token is not None and conn.token is not None and hmac.compare_digest(token.encode(), conn.token.encode())


def parse_target(path: tuple[str, ...]) -> tuple[str, str] | None:
    """(device id, "up" | "down") for `/gw/D/up` or `/gw/D/down`, else None."""
    if len(path) == 3 and path[0] == "gw" and path[2] in ("up", "down") and re.fullmatch(DEVICE_ID_PATTERN, path[1]):
        return path[1], path[2]
    return None


class GatewayResources(resource.Resource, interfaces.ObservableResource, resource.PathCapable):
    """The whole CoAP site: every path comes here, so an unknown one gets a diagnostic too."""

    def __init__(self, link: "CoapLink") -> None:
        super().__init__()
        self._link = link

    async def needs_blockwise_assembly(self, request: aiocoap.Message) -> bool:
        """Only uploads within the size limit to a live session whose token they carry are put
        together (aiocoap keeps the blocks for minutes); the rest is refused at its first block, so
        nobody without a session can make the gateway hold unfinished uploads."""
        return not self._oversized(request) and (request.opt.block1 is None or self._in_session(request))

    def _in_session(self, request: aiocoap.Message) -> bool:
        target = parse_target(request.opt.uri_path)
        conn = self._link.connections.get(target[0]) if target is not None else None
        return conn is not None and holds_token(conn, session_token(request))

    def _oversized(self, request: aiocoap.Message) -> bool:
        """A block-wise upload that is (or says it will be, Size1) larger than a message may be."""
        block1 = request.opt.block1
        if block1 is None:
            return False  # a single datagram: its size is checked when it is decoded
        return max(request.opt.size1 or 0, block1.start + len(request.payload)) > self._link.max_frame_bytes

    def _peer(self, request: aiocoap.Message) -> str:
        return f"coap {request.remote.hostinfo}"

    def _target(self, request: aiocoap.Message) -> tuple[str, str] | aiocoap.Message:
        target = parse_target(request.opt.uri_path)
        if target is not None:
            return target
        shown = "/" + "/".join(request.opt.uri_path)
        log.info("%s: unknown-resource %s", self._peer(request), shown)
        return refusal(aiocoap.NOT_FOUND, "unknown-resource", f"no resource {shown}; the resources are {RESOURCES}")

    def _session(self, device_id: str, request: aiocoap.Message, what: str) -> "CoapDeviceConnection | aiocoap.Message":
        """D's session if the request carries its token; else the refusal (logged)."""
        conn = self._link.connections.get(device_id)
        if conn is None:
            if (lost := self._lease_lost(device_id, request, what)) is not None:
                return lost
            return refusal(aiocoap.NOT_FOUND, "hello-required",
                           f"{device_id} has no session; POST a Hello to /gw/{device_id}/up first")
        token = session_token(request)
        if token is None:
            reason, text = "session-token-missing", "add ?s=<token>, the session_id of the Welcome that answered your Hello"
        elif not holds_token(conn, token):
            reason, text = "session-token-wrong", f"this is not the token of {device_id}'s session; send Hello for a new session"
        else:
            return conn
        log.warning("%s: %s refused: %s (%s's session from %s is untouched)",
                    self._peer(request), what, reason, device_id, conn.address)
        return refusal(aiocoap.UNAUTHORIZED, reason, text)

    async def render(self, request: aiocoap.Message) -> aiocoap.Message:
        target = self._target(request)
        if isinstance(target, aiocoap.Message):
            return target
        device_id, channel = target
        if self._oversized(request):
            limit = self._link.max_frame_bytes
            log.warning("%s: POST /gw/%s/%s refused: frame-too-large (block-wise upload beyond %d bytes)",
                        self._peer(request), device_id, channel, limit)
            too_large = refusal(aiocoap.REQUEST_ENTITY_TOO_LARGE, "frame-too-large",
                                f"a message is at most {limit} bytes (server.max_frame_bytes)")
            too_large.opt.size1 = limit
            return too_large
        if request.opt.block1 is not None and not self._in_session(request):  # not put together: refused
            refused = self._session(device_id, request, f"block-wise {request.code} /gw/{device_id}/{channel}")
            if isinstance(refused, aiocoap.Message):
                return refused
        if channel == "up" and request.code == aiocoap.POST:
            return await self._post_up(device_id, request)
        if channel == "down" and request.code == aiocoap.GET:
            return self._get_down(device_id, request)
        observe = " with Observe" if request.opt.observe is not None else ""
        log.info("%s: method-not-allowed %s%s on /gw/%s/%s", self._peer(request), request.code, observe, device_id, channel)
        allowed = "POST" if channel == "up" else "GET (with or without Observe)"
        return refusal(aiocoap.METHOD_NOT_ALLOWED, "method-not-allowed",
                       f"/gw/{device_id}/{channel} takes {allowed}; replies are observed on /gw/{device_id}/down")

    async def _post_up(self, device_id: str, request: aiocoap.Message) -> aiocoap.Message:
        item = self._decode(request.payload)
        what = f"POST /gw/{device_id}/up"
        if isinstance(item, Hello):  # a Hello opens a session: the device's token is checked in it
            if item.device_id != device_id:
                log.warning("%s: %s refused: hello-device-mismatch (Hello of %s)", self._peer(request), what, item.device_id)
                return refusal(aiocoap.BAD_REQUEST, "hello-device-mismatch",
                               f"the Hello is for {item.device_id!r}; POST it to /gw/{item.device_id}/up")
            conn = await self._link.hello(device_id, str(request.remote.hostinfo), item)
            return aiocoap.Message(code=aiocoap.CHANGED, payload=conn.drain())
        if self._link.connections.get(device_id) is None:  # no session (expired, gateway restarted, moved)
            if (lost := self._lease_lost(device_id, request, what)) is not None:
                return lost
            return aiocoap.Message(code=aiocoap.CHANGED, payload=self._hello_required(device_id, request, item))
        conn = self._session(device_id, request, what)
        if isinstance(conn, aiocoap.Message):
            return conn
        if not await self._link.deliver(conn, item):
            busy = refusal(aiocoap.SERVICE_UNAVAILABLE, "busy", "the session's inbox is full; send this again in a second")
            busy.opt.max_age = 1
            return busy
        if conn.lease_lost_why is not None:  # taken over while this request waited for its answer
            return refusal(aiocoap.UNAUTHORIZED, "lease-lost", f"{conn.lease_lost_why}; send Hello")
        # An observing device gets everything by notification, so the stream stays in order.
        return aiocoap.Message(code=aiocoap.CHANGED, payload=b"" if conn.observers else conn.drain())

    def _lease_lost(self, device_id: str, request: aiocoap.Message, what: str) -> aiocoap.Message | None:
        """4.01 lease-lost for the token of D's session that another gateway took over; else None."""
        token, lost = session_token(request), self._link.lost_tokens.get(device_id)
        if token is None or lost is None or not hmac.compare_digest(token.encode(), lost[0].encode()):
            return None
        log.info("%s: %s refused: lease-lost (the session of %s here ended: %s)", self._peer(request), what,
                 device_id, lost[1])
        return refusal(aiocoap.UNAUTHORIZED, "lease-lost", f"{lost[1]}; POST a Hello to /gw/{device_id}/up")

    def _decode(self, payload: bytes) -> Message | ProtocolError:
        if len(payload) > self._link.max_frame_bytes:
            return ProtocolError("frame-too-large", f"payload of {len(payload)} bytes exceeds {self._link.max_frame_bytes}")
        try:
            return decode(payload)
        except ProtocolError as exc:
            return exc

    def _hello_required(self, device_id: str, request: aiocoap.Message, item: Message | ProtocolError) -> bytes:
        """The answer, in the downlink framing, to a message for a device with no session."""
        if isinstance(item, ProtocolError):
            error = Error(code=item.code, text=item.text)
        else:
            error = Error(code="hello-required", text=f"send hello first (got {item.NAME})")
        log.warning("%s (%s): %s: %s (no session)", self._peer(request), device_id, error.code, error.text)
        return encode_stream_frame(error)

    def _get_down(self, device_id: str, request: aiocoap.Message) -> aiocoap.Message:
        conn = self._session(device_id, request, f"GET /gw/{device_id}/down")
        if isinstance(conn, aiocoap.Message):
            return conn
        conn.touch()  # a fetch or an observe (re-)registration keeps the session alive
        payload = conn.drain(NOTIFICATION_BYTES)
        if conn.outbox:  # the rest goes in the next notification(s)
            asyncio.get_running_loop().call_soon(conn.notify)
        return aiocoap.Message(code=aiocoap.CONTENT, payload=payload)

    async def add_observation(self, request: aiocoap.Message, serverobservation) -> None:
        # aiocoap 0.4 fails (5.00) on a refused observation that was never accepted: accept every
        # one, keep only D's own, and let render's 4.xx end the others.
        target = parse_target(request.opt.uri_path) if request.code == aiocoap.GET else None
        conn = self._link.connections.get(target[0]) if target is not None and target[1] == "down" else None
        if conn is None or not holds_token(conn, session_token(request)):
            serverobservation.accept(lambda: None)
            return
        conn.observers.add(serverobservation)
        conn.observed.set()
        serverobservation.accept(lambda: conn.observers.discard(serverobservation))
