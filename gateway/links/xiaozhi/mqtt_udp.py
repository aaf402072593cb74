"""xiaozhi boxes over MQTT + UDP (the firmware's other transport), served on the gateway's MQTT link.

With `xiaozhi.mqtt_udp` on, a box's OTA answer gets an `mqtt` section (`mqtt_section`), which the
firmware prefers to the WebSocket: it logs in to the broker with client id
`GID_edge@@@<mac with _>@@@<Client-Id>`, username = its device id (`xiaozhi-<mac>`) and password =
its token (the same one the `websocket` section carries, stored hashed in the registry, so the
embedded broker checks it like any device login), then publishes JSON to
`xiaozhi/<device id>/up`. It never subscribes: the embedded broker subscribes each box login to
`xiaozhi/<device id>/down` when it connects (`pushed_topics`); an external broker must do the same
(docs/XIAOZHI.md). A hello opens a session (a `MqttUdpChannel` under the same `XiaozhiConnection`
translation as the WebSocket, so the same voice pipeline) and gets the `udp` section; its audio
travels on this extension's UDP port. A message before any hello is answered with `goodbye` (as
the firmware's server counterpart does), so the box opens its channel again.
"""

from __future__ import annotations

import asyncio
import logging
import re
from typing import Any

from firmware_protocol import ProtocolError
from gateway.links.base import ConnectionHandler, LinkClosed, LinkServices
from gateway.links.mqtt_extension import BrokerAddress, RawPublish
from gateway.devices.device_actions import DeviceActions
from gateway.links.xiaozhi import framing
from gateway.links.xiaozhi.box_tools import ToolServices
from gateway.links.xiaozhi.connection import XiaozhiConnection, XiaozhiSettings
from gateway.links.xiaozhi.emotions import EmotionTable
from gateway.links.xiaozhi.mqtt_channel import MqttUdpChannel
from gateway.links.xiaozhi.udp_server import UdpAudioServer

log = logging.getLogger(__name__)

PREFIX = "xiaozhi"
GROUP = "GID_edge"
KEEPALIVE_S = 240  # the firmware's default
_BOX = re.compile(r"xiaozhi-[0-9a-f]{12}")


def is_box(username: str | None) -> bool:
    return username is not None and _BOX.fullmatch(username) is not None


def up_topic(device_id: str) -> str:
    return f"{PREFIX}/{device_id}/up"


def down_topic(device_id: str) -> str:
    return f"{PREFIX}/{device_id}/down"


def client_id_for(mac: str, client_uuid: str) -> str:
    return f"{GROUP}@@@{mac.lower().replace(':', '_').replace('-', '_')}@@@{client_uuid or 'no-client-id'}"


class XiaozhiMqttUdp:
    name = "xiaozhi-mqtt-udp"
    topic_filters = (f"{PREFIX}/+/up",)

    def __init__(self, settings: XiaozhiSettings, emotions: EmotionTable, udp_bind: str, udp_port: int,
                 udp_host: str = "", actions: DeviceActions | None = None) -> None:
        """`udp_host`: the address boxes send audio to ("": the one they reached the OTA on);
        `actions`: Action codes -> the box's own tools, as on the WebSocket."""
        self.settings = settings
        self.emotions = emotions
        self.actions = actions or DeviceActions()
        self._tools: ToolServices | None = None  # the boxes' own MCP tools, when the gateway offers them
        self.udp = UdpAudioServer(udp_bind, udp_port)
        self.udp_host = udp_host
        self.broker: BrokerAddress | None = None  # set while serving
        self._reached_at: dict[str, str] = {}  # device id -> the address its OTA request came in on
        self._channels: dict[str, MqttUdpChannel] = {}
        self._publish: RawPublish | None = None
        self._handler: ConnectionHandler | None = None
        self._tg: asyncio.TaskGroup | None = None

    # ---- the OTA answer ---------------------------------------------------------------------
    def mqtt_section(self, device_id: str, mac: str, client_uuid: str, token: str | None, local_host: str) -> dict[str, Any] | None:
        """The `mqtt` section for this box (no `password` when no new token was issued: the box
        keeps the one it has), None while the MQTT link is not serving."""
        if self.broker is None:
            return None
        self._reached_at[device_id] = local_host
        host = self.broker.host or local_host
        section: dict[str, Any] = {"endpoint": f"{host}:{self.broker.port}", "client_id": client_id_for(mac, client_uuid),
                                   "username": device_id, "publish_topic": up_topic(device_id),
                                   "subscribe_topic": down_topic(device_id), "keepalive": KEEPALIVE_S}
        if token is not None:
            section["password"] = token
        return section

    # ---- broker rules (embedded broker) -----------------------------------------------------
    def owns(self, topic: str) -> bool:
        return topic.startswith(PREFIX + "/")

    def allows(self, username: str | None, topic: str, publish: bool) -> bool | None:
        if not self.owns(topic):
            return None
        parts = topic.split("/")
        return (len(parts) == 3 and is_box(username) and parts[1] == username
                and parts[2] == ("up" if publish else "down"))

    def pushed_topics(self, username: str | None) -> tuple[str, ...]:
        return (down_topic(username),) if is_box(username) else ()  # type: ignore[arg-type]

    def client_left(self, username: str | None) -> None:
        channel = self._channels.get(username or "")
        if channel is not None:
            channel.end("the box left the broker")

    # ---- messages ---------------------------------------------------------------------------
    def on_message(self, topic: str, payload: bytes) -> None:
        parts = topic.split("/")
        if len(parts) != 3 or parts[2] != "up" or not is_box(parts[1]):
            log.warning("xiaozhi mqtt: ignored a publish on %s: not xiaozhi/<box id>/up", topic)
            return
        device_id = parts[1]
        peer = f"xiaozhi mqtt {device_id}"
        if len(payload) > self.settings.max_frame_bytes:
            log.warning("%s: frame-too-large: publish of %d bytes exceeds %d, ignored", peer, len(payload),
                        self.settings.max_frame_bytes)
            return
        text = payload.decode("utf-8", errors="replace")
        try:
            msg = framing.parse_json(text)
        except ProtocolError:  # malformed: the box's session (if any) reports it
            msg = {}
        kind = msg.get("type")
        channel = self._channels.get(device_id)
        if kind == "hello":
            if channel is not None:
                channel.end("a new hello started a new session")
            channel = self._open(device_id)
        elif channel is None:
            log.info("%s: %s message before any hello: answered goodbye", peer, kind or "a malformed")
            if kind != "goodbye":
                session = msg.get("session_id") if isinstance(msg.get("session_id"), str) else ""
                self._send(device_id, framing.dump({"type": "goodbye", "session_id": session}).encode())
            return
        channel.deliver(text)

    def _send(self, device_id: str, data: bytes) -> None:
        if self._publish is None:
            raise LinkClosed("the MQTT link is not serving")
        self._publish(down_topic(device_id), data)

    def _open(self, device_id: str) -> MqttUdpChannel:
        assert self._tg is not None and self._handler is not None
        host = self.udp_host or self._reached_at.get(device_id) or "127.0.0.1"
        channel = MqttUdpChannel(device_id, lambda data: self._send(device_id, data), self.udp, host, self._forget)
        self._channels[device_id] = channel
        conn = XiaozhiConnection(channel, self.settings, self.emotions, tools=self._tools)
        self._tg.create_task(self._handler(conn), name=f"xiaozhi-mqtt {device_id}")
        return channel

    def _forget(self, channel: MqttUdpChannel) -> None:
        if self._channels.get(channel.device_id) is channel:
            del self._channels[channel.device_id]

    # ---- serving ----------------------------------------------------------------------------
    async def serve(self, publish: RawPublish, handler: ConnectionHandler, services: LinkServices,
                    broker: BrokerAddress, ready: asyncio.Event) -> None:
        """Box sessions are authenticated by their broker login, so they are served without a
        second token check (`services.serve_authenticated`) when the gateway offers that."""
        await self.udp.start()  # OSError when the port is taken
        self._publish = publish
        self._handler = services.serve_authenticated or handler
        if services.device_tools is not None:
            self._tools = ToolServices(services.device_tools, self.actions)
        try:
            async with asyncio.TaskGroup() as tg:
                self._tg = tg
                self.broker = broker
                ready.set()
                await asyncio.get_running_loop().create_future()  # sessions run until cancelled
        finally:
            self.broker = None
            for channel in list(self._channels.values()):
                channel.end("the gateway stops")
            self._tg = None
            self.udp.close()
