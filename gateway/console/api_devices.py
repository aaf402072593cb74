"""Console API for devices, over the device registry, the activation codes and the console's
device -> person mapping (a DeviceRegistry, an ActivationStore and a PeopleStore: the devices
database, or PostgreSQL shared by several gateways) and the live sessions (SessionRegistry).

    GET  devices           {"connected": [...], "registered": [...], "pending": [...]}; in cluster
                           mode also "cluster": {"member": this gateway's id, "devices": every
                           device the cluster knows, with the member serving it ("gateway")}, and
                           each registered device's "served_by" (that member, null: nobody now)
    POST devices/add       {"device_id", "name"} -> its token (shown once) and firmware settings
    POST devices/remove    {"device_id"}
    POST devices/rename    {"device_id", "name"}
    POST devices/approve   {"code"}        a xiaozhi box waiting with this activation code
    POST devices/reject    {"device_id"}   forget its code (it asks again for a new one)
    POST devices/person    {"device_id", "person"}   whose memory and conversation the device uses:
                           a person's id, "" = its own memory, null = as gateway.yaml (memory.users)
                           says; stored in the PeopleStore (gateway/devices/people.py)
"""

from __future__ import annotations

import ipaddress
import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from firmware_protocol import AudioFormat
from firmware_protocol.session_messages import DEVICE_ID_PATTERN
from gateway.cluster.directory import DeviceEntry
from gateway.devices import activation
from gateway.devices.activation import ActivationStore
from gateway.devices.device_registry import DeviceRegistry
from gateway.devices.people import PeopleStore
from gateway.devices.registry import SessionRegistry
from gateway.console.routes import ApiError, ApiRequest, Routes, text_field
from gateway.memory.device_users import DevicePeople
from gateway.memory.errors import MemoryInputError
from gateway.memory.node_input import check_user

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DeviceSettings:
    """What the console shows about where devices connect and whose memory they use."""

    websocket_port: int
    websocket_path: str
    open_enrolment: bool
    activation_ttl_s: float
    person_of: Callable[[str], str]  # device id -> the memory user (the mapping below, else its own)
    people: DevicePeople  # device id -> person: memory.users with the console's changes (live)


@dataclass(frozen=True)
class ClusterView:
    """Cluster mode: this member's id and which live member serves each device (gateway/cluster/directory.py)."""

    member: str
    devices: Callable[[], list[DeviceEntry]]


def _loopback(host: str) -> bool:
    """localhost or a loopback address: not where a device on the LAN reaches the gateway."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _format(f: AudioFormat) -> str:
    return f"{f.codec} {f.sample_rate} Hz {'mono' if f.channels == 1 else f'{f.channels} ch'}"


class DevicesApi:
    def __init__(self, devices: DeviceRegistry, registry: SessionRegistry, settings: DeviceSettings,
                 activations: ActivationStore, people_store: PeopleStore, clock: Callable[[], float] = time.time,
                 cluster: ClusterView | None = None) -> None:
        self._cluster = cluster
        self._devices = devices
        self._activations = activations
        self._people_store = people_store
        self._registry = registry
        self._settings = settings
        self._clock = clock

    def routes(self) -> Routes:
        return {("GET", "devices"): self.list, ("POST", "devices/add"): self.add,
                ("POST", "devices/remove"): self.remove, ("POST", "devices/rename"): self.rename,
                ("POST", "devices/approve"): self.approve, ("POST", "devices/reject"): self.reject,
                ("POST", "devices/person"): self.person}

    def _device_id(self, body: Any) -> str:
        device_id = text_field(body, "device_id", max_len=64)
        if re.fullmatch(DEVICE_ID_PATTERN, device_id) is None:
            raise ApiError(400, f"device_id {device_id!r}: 1..64 of A-Z a-z 0-9 . _ : -", "device_id")
        return device_id

    async def list(self, request: ApiRequest) -> dict[str, Any]:
        now = self._clock()
        registered = await self._devices.list_devices()
        pending = await self._activations.pending()
        known = {d.device_id for d in registered}
        connected = []
        for device_id in self._registry.connected():
            conn = self._registry.get(device_id)
            peer = conn.peer if conn is not None else ""
            link, _, address = peer.partition(" ")
            entry = {"device_id": device_id, "link": link, "address": address,
                     "can_speak": self._registry.can_speak(device_id), "registered": device_id in known,
                     "person": self._settings.person_of(device_id), "mapped": device_id in self._settings.people,
                     "person_source": self._settings.people.source(device_id), "audio_in": "", "audio_out": "",
                     "firmware": "", "since": None}
            if (found := self._registry.hello(device_id)) is not None:
                hello, since = found
                entry |= {"audio_in": _format(hello.audio_in), "audio_out": _format(hello.audio_out),
                          "firmware": hello.firmware, "since": since}
            connected.append(entry)
        online = set(self._registry.connected())
        answer = {
            "connected": connected,
            "registered": [{"device_id": d.device_id, "name": d.name, "created_at": d.created_at.timestamp(),
                            "last_seen": d.last_seen.timestamp() if d.last_seen else None,
                            "connected": d.device_id in online, "person": self._settings.person_of(d.device_id),
                            "mapped": d.device_id in self._settings.people,
                            "person_source": self._settings.people.source(d.device_id)} for d in registered],
            "pending": [{"device_id": p.device_id, "code": p.code, "details": p.details, "approved": p.approved,
                         "expires_in": round(p.expires_at - now)} for p in pending],
            "open_enrolment": self._settings.open_enrolment,
        }
        if self._cluster is not None:
            entries = self._cluster.devices()
            served = {e.device_id: e.gateway for e in entries}
            for d in answer["registered"]:
                d["served_by"] = served.get(d["device_id"])
            answer["cluster"] = {"member": self._cluster.member, "devices": [e.as_dict() for e in entries]}
        return answer

    async def add(self, request: ApiRequest) -> dict[str, Any]:
        device_id = self._device_id(request.body)
        name = text_field(request.body, "name", max_len=100, required=False)
        token = await self._devices.add_device(device_id, name)
        log.info("%s: device %s registered (a new token issued)", request.peer, device_id)
        s = self._settings
        # the address the console was opened on is one the LAN reaches the gateway at
        host = request.host if request.host and not _loopback(request.host) else "<gateway-host>"
        return {"device_id": device_id, "name": name, "token": token,
                "firmware": {"GATEWAY_DEVICE_ID": device_id, "GATEWAY_TOKEN": token,
                             "GATEWAY_WS_URL": f"ws://{host}:{s.websocket_port}{s.websocket_path}"}}

    async def remove(self, request: ApiRequest) -> dict[str, Any]:
        device_id = self._device_id(request.body)
        if not await self._devices.remove_device(device_id):
            raise ApiError(404, f"no device {device_id} is registered", "device_id")
        log.info("%s: device %s removed", request.peer, device_id)
        return {"removed": device_id}

    async def rename(self, request: ApiRequest) -> dict[str, Any]:
        device_id = self._device_id(request.body)
        name = text_field(request.body, "name", max_len=100, required=False)
        if not await self._devices.rename_device(device_id, name):
            raise ApiError(404, f"no device {device_id} is registered", "device_id")
        log.info("%s: device %s renamed to %r", request.peer, device_id, name)
        return {"device_id": device_id, "name": name}

    async def approve(self, request: ApiRequest) -> dict[str, Any]:
        code = text_field(request.body, "code", max_len=16)
        if not activation.valid_code(code):
            raise ApiError(400, f"{code!r} is not an activation code: the box shows and speaks 6 digits", "code")
        approved = await self._activations.approve(code)
        if approved is None:
            raise ApiError(404, f"no box is waiting with code {code}: it is wrong or expired", "code")
        log.info("%s: box %s approved (code %s, %s)", request.peer, approved.device_id, code, approved.details)
        return {"approved": approved.device_id, "details": approved.details}

    async def reject(self, request: ApiRequest) -> dict[str, Any]:
        device_id = self._device_id(request.body)
        if not await self._activations.reject(device_id):
            raise ApiError(404, f"no box {device_id} is waiting for activation", "device_id")
        log.info("%s: box %s rejected (its activation code forgotten)", request.peer, device_id)
        return {"rejected": device_id}

    async def person(self, request: ApiRequest) -> dict[str, Any]:
        device_id = self._device_id(request.body)
        if "person" not in request.body:
            raise ApiError(400, 'person: a person\'s id, "" for the device\'s own memory, or null for gateway.yaml\'s', "person")
        person = request.body["person"]
        if person is not None:
            if not isinstance(person, str):
                raise ApiError(400, 'person: a person\'s id, "" for the device\'s own memory, or null', "person")
            person = person.strip()
            if person:
                try:
                    check_user(person)
                except MemoryInputError as exc:
                    raise ApiError(400, f"person: {exc}", "person") from None
        people, before = self._settings.people, self._settings.person_of(device_id)
        if person is None:
            await self._people_store.clear(device_id)
            people.reset(device_id)
        else:
            await self._people_store.set(device_id, person, self._clock())
            people.set(device_id, person)
        after = self._settings.person_of(device_id)
        log.info("%s: device %s now belongs to %s (%s; was %s): its conversation and memory are %s's from its next turn",
                 request.peer, device_id, after, people.source(device_id), before, after)
        return {"device_id": device_id, "person": after, "was": before, "person_source": people.source(device_id)}
