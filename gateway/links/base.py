"""The one interface between transports and the core.

A *link* (WebSocket, MQTT, CoAP, serial, the LAN screens, in-memory) accepts device connections
and hands each one to the core as a `DeviceConnection`. The link turns bytes into messages of the wire
contract; bytes that do not decode come out as a `ProtocolError` value (not an exception), so the
core answers with an `Error` message, logs the peer and the reason, and keeps serving.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from firmware_protocol import Message, ProtocolError

if TYPE_CHECKING:
    from gateway.bus import EventBus
    from gateway.devices.activation import ActivationStore
    from gateway.devices.auth import Enrolled
    from gateway.devices.device_tools import DeviceTools
    from gateway.links.http_front import HttpMount


class LinkClosed(Exception):
    """The connection is gone (peer closed, network lost)."""


class DeviceConnection(Protocol):
    peer: str  # human-readable "transport address", used in every log line about this device

    async def receive(self) -> Message | ProtocolError:
        """Next inbound message, or the error for an undecodable frame. Raises LinkClosed."""
        ...

    async def send(self, message: Message) -> None:
        """Send one message. Raises LinkClosed."""
        ...

    async def close(self, reason: str = "") -> None: ...


class ManyInFlight:
    """Marks a connection whose device sends its next messages before the answers to the last
    (MQTT: QoS 1 publishes in flight). Its session stores readings side by side and acks them in
    order (gateway/devices/reading_acks.py); other connections are answered one message at a time,
    so e.g. a CoAP response still carries the ack of the reading it posted."""


class Roaming:
    """Marks a connection whose device may come back through another gateway of a cluster (a load
    balancer or DNS in front of the members picks one: WebSocket, CoAP). In cluster mode its session
    takes the device's lease at the Hello (gateway/devices/session_lease.py); when another gateway
    takes the device, `lease_lost` ends the connection with the transport's own refusal."""

    async def lease_lost(self, text: str) -> None:
        raise NotImplementedError


ConnectionHandler = Callable[[DeviceConnection], Awaitable[None]]


# (username or None, password or None) -> may this client log in? (a broker's device logins)
CredentialCheck = Callable[[str | None, str | None], Awaitable[bool]]


# The registered devices' broker logins: (device id, mosquitto password hash or None), for the
# embedded mosquitto's password file and ACL (gateway/links/mosquitto.py).
BrokerLogins = Callable[[], Awaitable[list[tuple[str, str | None]]]]


async def no_logins() -> list[tuple[str, str | None]]:
    return []


async def open_door(username: str | None, password: str | None) -> bool:
    return True


class Enrolment(Protocol):
    """The device registry as a link's own enrolment needs it (gateway/devices/auth.py
    Authenticator; the xiaozhi OTA bootstrap)."""

    open_enrolment: bool

    async def issue_token(self, device_id: str, name: str, client_id: str, may_register: bool = True,
                          max_enrolled: int = 256) -> Enrolled | None:
        """With open enrolment: a new token for a new device (bound to `client_id`) or for one
        bound to that `client_id`, else the refusal (gateway/devices/auth.py enrol_box); closed: None."""
        ...

    async def is_registered(self, device_id: str) -> bool: ...


@dataclass(frozen=True)
class LinkServices:
    """What the gateway hands every link when it serves it; each link takes what it needs (the
    LAN screens follow the bus, the embedded MQTT broker checks logins, the xiaozhi OTA bootstrap
    enrols boxes, and with enrolment closed gives unknown ones activation codes, and offers the
    boxes' own tools). The defaults suit a link served on its own (tests, benchmarks): no events,
    every login accepted, no enrolment."""

    bus: EventBus | None = None
    check_credentials: CredentialCheck = open_door
    broker_logins: BrokerLogins = no_logins
    # Runs a connection whose device the link authenticated itself (a xiaozhi box's broker login,
    # checked against the registry), so its Hello's token is not checked again; None: `handler`.
    serve_authenticated: ConnectionHandler | None = None
    enrolment: Enrolment | None = None
    activations: ActivationStore | None = None
    device_tools: DeviceTools | None = None  # where a device's own tools (a xiaozhi box's MCP) are offered
    console: HttpMount | None = None  # the web console (gateway/console/), served by the screen server


class DeviceLink(Protocol):
    name: str

    async def serve(self, handler: ConnectionHandler, ready: asyncio.Event | None = None,
                    services: LinkServices | None = None) -> None:
        """Accept connections and run `handler` for each until cancelled. Sets `ready` once listening.
        Raises OSError when it cannot listen (the port is taken): it never returns before `ready`."""
        ...
