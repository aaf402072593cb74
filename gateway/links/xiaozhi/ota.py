"""The xiaozhi OTA bootstrap: what a box asks at every boot, and where it learns the WebSocket.

The firmware (main/ota.cc) POSTs its system info JSON with the headers Device-Id (its MAC),
Client-Id (a UUID), User-Agent (board/version)... and reads from the reply: `server_time`
(sets its clock), `firmware` (an update only when `url` is set: never here), `websocket` (each
key is saved: url, token) and, if present, `mqtt` (which switches it to MQTT+UDP: sent with
`xiaozhi.mqtt_udp`, gateway/links/xiaozhi/mqtt_udp.py, with the same token as its password).
Enrolment (devices.open_enrolment): on, a box gets a fresh token at each request (registered on
the first one, stored hashed, and bound to its Client-Id: a request with the box's MAC and another
Client-Id is refused 403, so a MAC is not enough to take a box over; a box registered before the
binding is bound at its next request, trust on first use). New registrations are limited per
address (`xiaozhi.enrolments_per_hour_per_address`, then 429) and in total
(`xiaozhi.max_enrolled_boxes`, then 403); refusals are logged once per address and interval.
Off, a registered box gets the URL without a token (it keeps the one it has) and an unknown box an
`activation` section instead of `websocket`: a 6-digit code it shows and speaks, a message, a
challenge and `timeout_ms` (gateway/devices/activation.py; the code belongs to the box's
Client-Id: only a request with it claims the approved token). The box then POSTs `<ota_url>/activate` every 3 s (at most ten times, then it asks the OTA again):
202 while the owner has not typed `gateway devices activate CODE`, 200 once approved; its next
OTA request gets `websocket {url, token}`. The /activate body of a box with an eFuse serial number
is `{algorithm: hmac-sha256, serial_number, challenge, hmac}`: the HMAC is keyed with the box's
eFuse HMAC_KEY0, which only its maker knows, so the gateway cannot verify it; it checks that the
challenge, when sent, is the one it issued (the owner's approval is what admits the box).
"""

from __future__ import annotations

import ipaddress
import json
import logging
import time
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from gateway import __version__
from gateway.devices.activation import ActivationStore
from gateway.devices.auth import BOUND, FULL, NOT_ADMITTED, OTHER_CLIENT, REGISTERED, Enrolled
from gateway.links.base import Enrolment
from gateway.links.http_front import HttpReply, HttpRequest
from gateway.links.limits import LogThrottle
from gateway.links.xiaozhi.enrol_limit import NewBoxLimit
from gateway.links.xiaozhi.identity import device_id_of

if TYPE_CHECKING:
    from gateway.links.xiaozhi.mqtt_udp import XiaozhiMqttUdp

log = logging.getLogger(__name__)


READ_HEADERS = ("Device-Id", "Client-Id", "User-Agent")  # what the OTA endpoint reads: each at most once
MAX_CLIENT_ID = 128  # the firmware's is a 36-character UUID


class Refused(Exception):
    """A request answered `reply` (its log line is written where it is raised)."""

    def __init__(self, reply: HttpReply) -> None:
        super().__init__(reply.status)
        self.reply = reply


def _json_reply(status: int, value: dict[str, Any], headers: tuple[tuple[str, str], ...] = ()) -> HttpReply:
    return HttpReply(status, json.dumps(value, ensure_ascii=False).encode(), "application/json", headers)


def _repeated(peer: str, request: HttpRequest) -> HttpReply | None:
    """The refusal of a request with one of the headers the endpoint reads more than once (logged)."""
    for name in READ_HEADERS:
        if len(request.headers.get_all(name)) > 1:
            log.warning("%s: refused: the %s header comes more than once", peer, name)
            return HttpReply(400, f"the {name} header must come once\n".encode())
    return None


def _not_a_mac(peer: str, mac: str) -> HttpReply:
    """The refusal of a request whose Device-Id header is not the box's MAC address (logged)."""
    log.warning("%s: refused: Device-Id header %r is not a MAC address", peer, mac)
    return HttpReply(400, b"Device-Id header (the box's MAC address) missing or malformed\n")


def _host(address: str) -> str:
    try:
        return f"[{address}]" if ipaddress.ip_address(address).version == 6 else address
    except ValueError:
        return address


class OtaService:
    def __init__(self, ws_path: str, websocket_url: str = "", enrolment: Enrolment | None = None,
                 clock: Callable[[], float] = time.time, activations: ActivationStore | None = None,
                 new_boxes: NewBoxLimit | None = None, max_enrolled: int = 256,
                 refusals: LogThrottle | None = None) -> None:
        self.ws_path = ws_path
        self.websocket_url = websocket_url
        self.enrolment = enrolment  # None: no registry (tests of the protocol): the URL without a token
        self.activations = activations  # None: with enrolment closed an unknown box gets nothing
        self._clock = clock
        self.new_boxes = new_boxes or NewBoxLimit(20)  # new registrations per address (open enrolment)
        self.max_enrolled = max_enrolled  # devices the open enrolment may have created in all
        self._refusals = refusals or LogThrottle(log)  # one line per address and reason per interval
        self.mqtt_udp: XiaozhiMqttUdp | None = None  # offered in the answer (XiaozhiEndpoint.mqtt_udp)

    def url_for(self, request: HttpRequest) -> str:
        """The WebSocket URL the box can reach: the address its request came in on."""
        if self.websocket_url:
            return self.websocket_url
        host, port = request.local
        return f"ws://{_host(host)}:{port}{self.ws_path}"

    def status(self) -> HttpReply:
        return HttpReply(200, (f"edge-voice-gateway {__version__}: xiaozhi OTA endpoint. "
                               f"Boxes POST their system info here; their WebSocket is {self.ws_path}\n").encode())

    async def handle(self, request: HttpRequest) -> HttpReply:
        if request.method == "GET":
            return self.status()
        if request.method != "POST":
            return HttpReply(405, b"use GET (status) or POST (a box's system info)\n")
        peer = f"xiaozhi OTA {request.remote[0]}:{request.remote[1]}"
        if (repeated := _repeated(peer, request)) is not None:
            return repeated
        mac = request.headers.get("Device-Id", "")
        if (device_id := device_id_of(mac)) is None:
            return _not_a_mac(peer, mac)
        try:
            info = json.loads(request.body) if request.body.strip() else {}
        except (ValueError, UnicodeDecodeError) as exc:
            log.warning("%s (%s): refused: the system info is not JSON (%s)", peer, mac, exc)
            return HttpReply(400, f"the body must be the box's system info as JSON: {exc}\n".encode())
        if not isinstance(info, dict):
            log.warning("%s (%s): refused: the system info is not a JSON object", peer, mac)
            return HttpReply(400, b"the body must be a JSON object (the box's system info)\n")
        app = info.get("application") if isinstance(info.get("application"), dict) else {}
        version = str(app.get("version", ""))
        offset = datetime.now().astimezone().utcoffset()
        reply: dict[str, Any] = {
            "server_time": {"timestamp": int(self._clock() * 1000),
                            "timezone_offset": int(offset.total_seconds() // 60) if offset else 0},
            "firmware": {"version": version, "url": ""},
        }
        try:
            websocket = await self._websocket(request, peer, mac, device_id, version)
        except Refused as refused:
            return refused.reply
        if websocket is not None:
            reply["websocket"] = websocket
        elif self.activations is not None:
            reply["activation"] = await self._activation(request, peer, mac, device_id, version, info)
        if websocket is not None and self.mqtt_udp is not None:
            mqtt = self.mqtt_udp.mqtt_section(device_id, mac, request.headers.get("Client-Id", ""),
                                              websocket.get("token"), request.local[0])
            if mqtt is not None:
                reply["mqtt"] = mqtt
        return _json_reply(200, reply)

    async def _websocket(self, request: HttpRequest, peer: str, mac: str, device_id: str, version: str) -> dict[str, Any] | None:
        url = self.url_for(request)
        if self.enrolment is None:
            return {"url": url, "token": ""}
        if self.enrolment.open_enrolment:
            enrolled = await self._enrol(request, peer, mac, device_id)
            how = {REGISTERED: "registered, bound to its Client-Id",
                   BOUND: "bound to its Client-Id now (registered before Client-Ids were kept: trusted on first use)"
                   }.get(enrolled.outcome, "same Client-Id")
            log.info("%s (%s): box %s (firmware %s) bootstrapped (%s): token issued, WebSocket %s",
                     peer, mac, device_id, version or "?", how, url)
            return {"url": url, "token": enrolled.token}
        if await self.enrolment.is_registered(device_id):
            log.info("%s (%s): registered box %s bootstrapped (keeps its token), WebSocket %s", peer, mac, device_id, url)
            return {"url": url}
        client_id = request.headers.get("Client-Id", "").strip()
        token = await self.activations.claim(device_id, _name(request, mac), client_id) if self.activations else None
        if token is not None:
            log.info("%s (%s): box %s activated by its owner: registered, token issued, WebSocket %s", peer, mac, device_id, url)
            return {"url": url, "token": token}
        if self.activations is None:
            log.warning("%s (%s): unknown box %s not enrolled: devices.open_enrolment is off, so it gets no "
                        "WebSocket (turn enrolment on while it boots once)", peer, mac, device_id)
        return None

    async def _enrol(self, request: HttpRequest, peer: str, mac: str, device_id: str) -> Enrolled:
        """Open enrolment: a token for a new box (within the limits) or the box bound to this
        Client-Id; raises Refused otherwise."""
        assert self.enrolment is not None
        address = request.remote[0]
        client_id = request.headers.get("Client-Id", "").strip()
        if not client_id or len(client_id) > MAX_CLIENT_ID or not client_id.isprintable():
            log.warning("%s (%s): refused: no usable Client-Id header (the UUID the box keeps), so no token", peer, mac)
            raise Refused(_json_reply(400, {"error": "client-id-required", "message":
                                            f"a Client-Id header (the box's UUID, 1..{MAX_CLIENT_ID} characters) is required"}))
        admitted = self.new_boxes.take(address)  # given back below unless the box is new (and registered)
        enrolled: Enrolled | None = None
        try:
            enrolled = await self.enrolment.issue_token(device_id, _name(request, mac), client_id, admitted,
                                                        self.max_enrolled)
        finally:
            if admitted and (enrolled is None or enrolled.outcome != REGISTERED):
                self.new_boxes.give_back(address)
        assert enrolled is not None  # open enrolment
        if enrolled.token is not None:
            return enrolled
        raise Refused(self._refusal(address, peer, mac, device_id, enrolled.outcome))

    def _refusal(self, address: str, peer: str, mac: str, device_id: str, outcome: str) -> HttpReply:
        """The answer to a box refused a token, logged once per address, device and reason per interval."""
        if outcome == OTHER_CLIENT:
            self._refusals.warning(
                (address, device_id, outcome), "%s (%s): refused: box %s is registered with another Client-Id "
                "(someone who knows its MAC, or the box after its settings were erased: then `gateway devices remove "
                "%s` lets it enrol again)", peer, mac, device_id, device_id)
            return _json_reply(403, {"error": "client-id-mismatch", "message":
                                     f"{device_id} is registered to another Client-Id"})
        if outcome == FULL:
            self._refusals.warning(
                (address, outcome), "%s (%s): refused: new box %s not registered: open enrolment has registered "
                "xiaozhi.max_enrolled_boxes (%d) devices already (remove unused ones with `gateway devices remove`, "
                "or raise the limit)", peer, mac, device_id, self.max_enrolled)
            return _json_reply(403, {"error": "enrolment-full", "message": "the gateway registers no more new boxes"})
        assert outcome == NOT_ADMITTED, outcome
        retry = self.new_boxes.retry_after_s(address)
        self._refusals.warning(
            (address, outcome), "%s (%s): refused: new box %s not registered: %d new boxes an hour from one address "
            "at most (xiaozhi.enrolments_per_hour_per_address); the next in %d s", peer, mac, device_id,
            self.new_boxes.per_hour, retry)
        return _json_reply(429, {"error": "enrolment-rate-limited", "message":
                                 f"too many new boxes from {address}; retry in {retry} s"}, (("Retry-After", str(retry)),))

    async def _activation(self, request: HttpRequest, peer: str, mac: str, device_id: str, version: str,
                          info: dict[str, Any]) -> dict[str, Any]:
        assert self.activations is not None
        board = info.get("board") if isinstance(info.get("board"), dict) else {}
        details = (f"MAC {mac}, Client-Id {request.headers.get('Client-Id', '') or '-'}, "
                   f"board {board.get('type') or request.headers.get('User-Agent', '') or '?'}, firmware {version or '?'}")
        pending = await self.activations.offer(device_id, details, request.headers.get("Client-Id", "").strip())
        left_ms = max(0, int((pending.expires_at - self.activations.now()) * 1000))
        if pending.approved:  # approved between the claim above and this offer: the next request claims it
            log.info("%s (%s): box %s approved, waiting for it to ask again", peer, mac, device_id)
        else:
            log.warning("%s (%s): unknown box %s waits for activation with code %s (devices.open_enrolment is off): "
                        "approve it with `gateway devices activate %s` within %d s", peer, mac, device_id,
                        pending.code, pending.code, left_ms // 1000)
        return {"code": pending.code, "message": f"gateway devices activate {pending.code}",
                "challenge": pending.challenge, "timeout_ms": left_ms}

    async def activate(self, request: HttpRequest) -> HttpReply:
        """`POST <ota_url>/activate`: 200 once the owner approved the box's code, 202 while it waits."""
        peer = f"xiaozhi activate {request.remote[0]}:{request.remote[1]}"
        if request.method != "POST":
            return HttpReply(405, b"the box POSTs here while it waits for its activation\n")
        if (repeated := _repeated(peer, request)) is not None:
            return repeated
        mac = request.headers.get("Device-Id", "")
        if (device_id := device_id_of(mac)) is None:
            return _not_a_mac(peer, mac)
        if self.enrolment is not None and await self.enrolment.is_registered(device_id):
            return HttpReply(200, b"success\n")  # registered (by an approval, or `gateway devices add`)
        pending = await self.activations.state(device_id) if self.activations else None
        if pending is None:
            log.warning("%s (%s): box %s has no valid activation code (expired or never asked): "
                        "it gets a new one at its next OTA request", peer, mac, device_id)
            return HttpReply(202, b"no valid activation code: ask the OTA URL again for a new one\n")
        challenge = _challenge(request.body)
        if challenge is not None and challenge != pending.challenge:
            log.warning("%s (%s): box %s sent a challenge that is not the one issued: refused", peer, mac, device_id)
            return HttpReply(400, b"challenge does not match the one issued\n")
        if pending.approved:
            log.info("%s (%s): box %s activation approved", peer, mac, device_id)
            return HttpReply(200, b"success\n")
        return HttpReply(202, f"waiting for `gateway devices activate {pending.code}`\n".encode())


def _name(request: HttpRequest, mac: str) -> str:
    client = request.headers.get("Client-Id", "")
    agent = request.headers.get("User-Agent", "")
    return f"xiaozhi box {mac} client {client or '-'} {agent}".strip()


def _challenge(body: bytes) -> str | None:
    """The challenge the box echoes in its /activate body (firmware with an eFuse serial number), if any."""
    try:
        value = json.loads(body) if body.strip() else {}
    except (ValueError, UnicodeDecodeError):
        return None
    challenge = value.get("challenge") if isinstance(value, dict) else None
    return challenge if isinstance(challenge, str) and challenge else None


OtaHandler = Callable[[HttpRequest], Awaitable[HttpReply]]
