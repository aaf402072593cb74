"""MQTT device link: the gateway is one MQTT client; each device is a topic prefix.

Topics (PROTOCOL.md, "MQTT"; gateway/links/mqtt_topics.py), with `P` = mqtt.topic_prefix and `D` = the device id:

- `P/D/up`     device -> gateway, one message per publish (QoS 0 for audio, QoS 1 otherwise)
- `P/D/down`   gateway -> device, one message per publish (QoS 0 for audio and ReadingAck, QoS 1 otherwise)
- `P/D/status` `online` / `offline`, retained; the device's last will is `offline`

The gateway subscribes to `P/+/up` and `P/+/status` with a persistent session, so QoS 1 messages
sent while it was away are delivered when it is back. A device's first message opens a session
(run by the core like any other connection; a Hello always opens a new one); `offline`, a broker
disconnect or `idle_s` of silence with an unanswered Ping ends it. Each device has a bounded inbox
(gateway/links/mqtt_connection.py). With `limits`, the sessions count towards the gateway's
`server.max_sessions` (shared with WebSocket and CoAP); a device that would open one more is
answered Error `too-many-sessions` on `P/D/down` and its message is dropped.

`embedded`: the gateway runs the broker itself, Debian's mosquitto (gateway/links/mosquitto.py,
its logins and ACL from the device registry; started by gateway/links/mqtt_broker_start.py); otherwise it is a client of `host:port`.

`cluster`: one of several gateways behind an external MQTT 5 broker (docs/SCALE-OUT.md): the
node (gateway/cluster/node.py) says which devices this gateway owns and holds their leases; the
link subscribes `P/D/up` only for those, drops what arrives for a device without a valid lease,
tags each downlink with its lease and sends none without one (gateway/links/mqtt_cluster.py). Its
client has a clean session and a Last Will that deletes its member record.

Other protocols can share the link as *extensions* (gateway/links/mqtt_extension.py: the
xiaozhi boxes' MQTT+UDP): their topics are subscribed and handed to them, and they run beside.
With the embedded broker they get a small amqtt broker of their own on `extension_port`
(gateway/links/mqtt_broker.py), because their clients need the broker to subscribe them, which
mosquitto cannot do.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import paho.mqtt.client as paho

from firmware_protocol import Error, Hello, Message, ProtocolError, decode, encode
from gateway.links.mqtt_dedup import RedeliveryFilter
from gateway.links.base import ConnectionHandler, LinkClosed, LinkServices
from gateway.links.limits import LogThrottle, PeerLimits
from gateway.links.mosquitto import MosquittoBroker
from gateway.links.mqtt_broker_start import start_extension_broker, start_mosquitto
from gateway.links.mqtt_client import AsyncPaho, Will
from gateway.links.mqtt_reconnect import stay_connected
from gateway.links.mqtt_cluster import MqttClusterPort, expiry_of, lease_properties
from gateway.links.mqtt_connection import MqttDeviceConnection
from gateway.links.mqtt_extension import BrokerAddress, MqttExtension
from gateway.links.mqtt_topics import device_topic, qos_for, valid_device_id

if TYPE_CHECKING:
    from gateway.cluster.node import ClusterNode

log = logging.getLogger(__name__)


class MqttLink:
    name = "mqtt"

    def __init__(
        self,
        host: str,
        port: int,
        *,
        topic_prefix: str = "gw",
        protocol: str = "3.1.1",
        client_id: str = "edge-gateway",
        username: str | None = None,
        password: str | None = None,
        max_frame_bytes: int = 65536,
        embedded: bool = False,
        inbox_messages: int = 256,
        offline_queue: int = 1000,
        extensions: Sequence[MqttExtension] = (),
        broker_folder: Path | None = None,
        extension_port: int = 1884,
        cluster: ClusterNode | None = None,
        limits: PeerLimits | None = None,
        idle_s: float | None = None,
        idle_probe_s: float = 10.0,
    ) -> None:
        """`embedded`: run mosquitto on host:port with its files in `broker_folder` (None: a
        temporary one), its device logins from `services.broker_logins` (the registry); the
        extensions' amqtt broker on `extension_port` checks logins with `services.check_credentials`.
        `limits`: the gateway's session count (None: no cap); `idle_s`: a silent session gets a Ping
        after this long and ends when `idle_probe_s` pass without an answer (None: never)."""
        self.host, self.port = host, port
        self.embedded = embedded
        self.prefix = topic_prefix
        self.protocol = protocol
        self.client_id = client_id
        self.username, self.password = username, password
        self.max_frame_bytes = max_frame_bytes
        self.inbox_messages = inbox_messages  # per device; newer messages are dropped when full
        self.offline_queue = offline_queue  # QoS 1 messages paho keeps while the broker is away
        self.extensions = tuple(extensions)
        self.broker_folder = broker_folder
        self.extension_port = extension_port
        self.cluster = cluster
        self.limits = limits
        self.idle_s, self.idle_probe_s = idle_s, idle_probe_s
        self._refusals = LogThrottle(log)
        self.not_leased = 0  # publishes dropped in cluster mode: their device's lease is not ours
        self._ext_client: AsyncPaho | None = None
        self.broker: MosquittoBroker | None = None  # the embedded one, while serving
        self.connections: dict[str, MqttDeviceConnection] = {}
        self._redeliveries = RedeliveryFilter()
        self.connects = 0  # successful (re)connections to the broker
        self.connected = asyncio.Event()  # set while connected to the broker
        self._client: AsyncPaho | None = None
        self._handler: ConnectionHandler | None = None
        self._tg: asyncio.TaskGroup | None = None

    def _subscribe(self) -> None:
        assert self._client is not None
        if self.cluster is not None:  # the node subscribes the status and its own devices' topics
            self.cluster.on_connected(MqttClusterPort(self, self._client))
        else:
            self._client.subscribe(f"{self.prefix}/+/up", 1)
            self._client.subscribe(f"{self.prefix}/+/status", 1)
        if self._ext_client is None:  # the extensions share this broker (an external one)
            self._subscribe_extensions(self._client)

    def _subscribe_extensions(self, client: AsyncPaho | None = None) -> None:
        client = client or self._ext_client
        assert client is not None
        for extension in self.extensions:
            for topic_filter in extension.topic_filters:
                client.subscribe(topic_filter, 0)

    def _on_message(self, msg: paho.MQTTMessage) -> None:
        topic, payload = msg.topic, msg.payload  # once: paho decodes the topic at each msg.topic
        for extension in self.extensions:
            if extension.owns(topic):
                extension.on_message(topic, payload)
                return
        if self.cluster is not None and self.cluster.owns_topic(topic):
            self.cluster.on_message(topic, payload, expiry_of(msg.properties))
            return
        if (where := device_topic(topic, self.prefix)) is None:
            return
        device_id, channel = where
        if not valid_device_id(device_id):
            log.warning("mqtt: ignored a publish on %s: not a valid device id", topic)
            return
        if channel == "status":
            if payload == b"offline" and (conn := self.connections.get(device_id)):
                conn.end("device went offline")
            if self.cluster is not None and payload in (b"online", b"offline"):
                self.cluster.on_status(device_id, payload == b"online")
            return
        if self.cluster is not None and self.cluster.lease(device_id) is None:
            self.not_leased += 1  # another gateway serves it (or will once its lease is ours)
            return
        if self._redeliveries.is_redelivery(topic, payload, msg.qos, msg.dup):
            log.info("mqtt %s: dropped a QoS 1 redelivery already processed (%d so far)",
                     device_id, self._redeliveries.dropped)
            return
        item: Message | ProtocolError
        if len(payload) > self.max_frame_bytes:
            item = ProtocolError("frame-too-large", f"publish of {len(payload)} bytes exceeds {self.max_frame_bytes}")
        else:
            try:
                item = decode(payload)
            except ProtocolError as exc:
                item = exc
        conn = self.connections.get(device_id)
        if conn is None or isinstance(item, Hello):  # a Hello always starts a new session
            if (conn := self._open(device_id)) is None:
                return
        conn.deliver(item)

    def _open(self, device_id: str) -> MqttDeviceConnection | None:
        """A new session for the device (None: refused, the gateway is full). The session slot
        belongs to the device id: a new Hello's session takes over its old session's."""
        if (old := self.connections.get(device_id)) is not None:
            old.end("a new Hello started a new session")
        elif self.limits is not None and (why := self.limits.admit(None)) is not None:
            self._refusals.warning("full", "mqtt %s: too-many-sessions: %s", device_id, why)
            try:
                self.publish_down(device_id, Error(code="too-many-sessions", text=why))
            except LinkClosed:
                pass
            return None
        conn = self.connections[device_id] = MqttDeviceConnection(self, device_id)
        assert self._tg is not None and self._handler is not None
        self._tg.create_task(self._handler(conn), name=f"mqtt {device_id}")
        return conn

    def open_leased(self, device_id: str) -> None:
        """Cluster mode: this gateway has just taken the device's lease. The device is asked for a
        Hello, which opens its session here (it resends then what another gateway left unanswered)."""
        try:
            self.publish_down(device_id, Error(code="hello-required", text="this gateway serves you now: send Hello"))
        except LinkClosed:  # off the broker: its next message gets hello-required from its session
            pass

    def end_session(self, device_id: str, reason: str) -> None:
        if (conn := self.connections.get(device_id)) is not None:
            conn.end(reason)

    def publish_down(self, device_id: str, message: Message) -> None:
        if self._client is None:
            raise LinkClosed("not connected to the broker")
        props = None
        if self.cluster is not None:  # fenced: nothing goes out without a lease surely still valid
            if not self.connected.is_set():  # paho would queue it and send it after the lease ran out
                raise LinkClosed("not connected to the broker")
            epoch = self.cluster.lease(device_id)
            if epoch is None:
                raise LinkClosed("this gateway holds no valid lease on the device")
            props = lease_properties(self.cluster.me, epoch)
        self._client.publish(f"{self.prefix}/{device_id}/down", encode(message), qos_for(message), properties=props)
        if self.cluster is not None:  # into the kernel now: a pause of this process cannot hold it back
            self._client.flush()     # past its lease (sessions' tasks call this, never paho's callbacks)

    def publish_raw(self, topic: str, payload: bytes) -> None:
        """For extensions: one QoS 0 publish (paho drops it while the broker is away)."""
        client = self._ext_client or self._client
        if client is None:
            raise LinkClosed("not connected to the broker")
        client.publish(topic, payload, 0)

    def _broker_host(self) -> str:
        if self.embedded and self.host in ("", "0.0.0.0", "::"):
            return "127.0.0.1"
        return self.host

    def forget(self, conn: MqttDeviceConnection) -> None:
        if self.connections.get(conn.device_id) is conn:
            del self.connections[conn.device_id]
            if self.limits is not None:
                self.limits.release(None)

    async def serve(self, handler: ConnectionHandler, ready: asyncio.Event | None = None,
                    services: LinkServices | None = None) -> None:
        self._handler = handler
        services = services or LinkServices()
        async with contextlib.AsyncExitStack() as stack:
            broker = None
            if self.embedded:
                broker = await self._start_broker(services, stack)
            ext_address = BrokerAddress("" if self.embedded else self.host, self.port, self.embedded)
            if self.embedded and self.extensions:
                ext_address = await self._start_extension_broker(services, stack)
            async with asyncio.TaskGroup() as tg:
                self._tg = tg
                if broker is not None:
                    tg.create_task(broker.supervise(), name="mosquitto")
                if self.idle_s is not None:
                    tg.create_task(self._expire_idle(self.idle_s), name="mqtt-idle")
                if self._ext_client is not None:
                    tg.create_task(stay_connected(self._ext_client, "127.0.0.1", ext_address.port, "mqtt (extensions)",
                                                  None, asyncio.Event()), name="mqtt-extensions")
                for extension in self.extensions:  # listening before the link says it is ready
                    listening = asyncio.Event()
                    tg.create_task(extension.serve(self.publish_raw, handler, services, ext_address,
                                                   listening), name=f"mqtt-{extension.name}")
                    await listening.wait()
                cluster = self.cluster  # a member: a clean session, a Will deleting its member record
                self._client = AsyncPaho(self.client_id, self._on_message, protocol=self.protocol,
                                         username=self.username, password=self.password, persistent=cluster is None,
                                         on_connect=self._subscribe, max_queued=self.offline_queue,
                                         resend_on_reconnect=cluster is None,
                                         will=Will(cluster.will_topic, b"") if cluster is not None else None)
                if cluster is not None:
                    tg.create_task(cluster.run(self.connected), name="cluster")
                    if services.bus is not None:  # the screens of every member follow every device
                        tg.create_task(cluster.share_events(services.bus), name="cluster-events")
                await stay_connected(self._client, self._broker_host(), self.port, "mqtt", ready, self.connected,
                                     self._count_connect, cluster.leave if cluster is not None else None)

    async def _expire_idle(self, idle_s: float) -> None:
        """Ping sessions silent for idle_s, end those whose Ping stays unanswered (checked 4x as often)."""
        while True:
            await asyncio.sleep(min(idle_s, self.idle_probe_s) / 4)
            now = time.monotonic()
            for conn in list(self.connections.values()):
                conn.check_idle(now, idle_s, self.idle_probe_s)

    def _count_connect(self) -> None:
        self.connects += 1
        log.info("mqtt: connected to %s:%d (MQTT %s), topics %s/+/up", self.host, self.port, self.protocol, self.prefix)

    async def _start_broker(self, services: LinkServices, stack: contextlib.AsyncExitStack) -> MosquittoBroker:
        """The embedded mosquitto for the gateway's own topics; the link then logs in to it."""
        broker = await start_mosquitto(self.broker_folder, self.host, self.port, self.prefix, self.max_frame_bytes,
                                       services, stack)
        self.broker = broker
        self.port = broker.port
        self.username, self.password = broker.gateway_user, broker.gateway_password
        self.client_id = broker.gateway_user  # with open enrolment the broker lets clients pick their id
        return broker

    async def _start_extension_broker(self, services: LinkServices,
                                      stack: contextlib.AsyncExitStack) -> BrokerAddress:
        """The extensions' own small amqtt broker (their clients need the broker to subscribe them)."""
        broker = await start_extension_broker(self.host, self.extension_port, self.prefix, self.extensions,
                                              services, stack)
        self.extension_port = broker.port  # the bound one, when 0 was asked for
        self._ext_client = AsyncPaho(broker.gateway_user, self._on_message, username=broker.gateway_user,
                                     password=broker.gateway_password, persistent=False,
                                     on_connect=self._subscribe_extensions)
        stack.push_async_callback(self._ext_client.disconnect)
        return BrokerAddress("", broker.port, True)
