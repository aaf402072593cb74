"""The xiaozhi endpoints on the gateway's WebSocket server: the OTA bootstrap (HTTP) and the box's
WebSocket, plugged into `WebSocketLink` (gateway/links/websocket.py routes by path)."""

from __future__ import annotations

import socket

from websockets.asyncio.server import ServerConnection

from gateway.audio.opus import OpusMeter
from gateway.config.sections import XiaozhiConfig
from gateway.devices.device_actions import DeviceActions
from gateway.links.base import DeviceConnection, LinkServices
from gateway.links.http_front import HttpReply, HttpRequest
from gateway.links.xiaozhi.box_tools import ToolServices
from gateway.links.xiaozhi.connection import XiaozhiSettings
from gateway.links.xiaozhi.emotions import EmotionTable
from gateway.links.xiaozhi.enrol_limit import NewBoxLimit
from gateway.links.xiaozhi.mqtt_udp import XiaozhiMqttUdp
from gateway.links.xiaozhi.ota import Enrolment, OtaService
from gateway.links.xiaozhi.roaming import RoamingXiaozhiConnection
from gateway.links.xiaozhi.ws_channel import WebSocketChannel


def lan_address() -> str | None:
    """This machine's address on its default route (what a box on the LAN reaches), if it has one.
    No packet is sent: connecting a UDP socket only picks the outgoing interface."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("10.254.254.254", 9))
            address = s.getsockname()[0]
    except OSError:
        return None
    return None if address.startswith("127.") or address == "0.0.0.0" else address


def _same(a: str, b: str) -> bool:
    return a.rstrip("/") == b.rstrip("/")


class XiaozhiEndpoint:
    name = "xiaozhi"

    def __init__(self, ota_path: str, ws_path: str, settings: XiaozhiSettings, emotions: EmotionTable,
                 websocket_url: str = "", enrolment: Enrolment | None = None,
                 actions: DeviceActions | None = None, enrolments_per_hour: int = 20, max_enrolled: int = 256) -> None:
        self.ota_path = ota_path
        self.ws_path = ws_path
        self.settings = settings
        self.emotions = emotions
        self.ota = OtaService(ws_path, websocket_url, enrolment, new_boxes=NewBoxLimit(enrolments_per_hour),
                              max_enrolled=max_enrolled)
        self.actions = actions or DeviceActions()
        self.tools: ToolServices | None = None  # the boxes' own tools: attached when served
        self.opus_meter: OpusMeter | None = None  # `gateway bench --xiaozhi`: every box's Opus CPU

    @classmethod
    def from_config(cls, x: XiaozhiConfig, emotions: EmotionTable, max_frame_bytes: int,
                    actions: DeviceActions | None = None) -> "XiaozhiEndpoint":
        settings = XiaozhiSettings(x.sample_rate, x.frame_duration_ms, x.max_ahead_ms, max_frame_bytes)
        return cls(x.ota_path, x.ws_path, settings, emotions, x.websocket_url, actions=actions,
                   enrolments_per_hour=x.enrolments_per_hour_per_address, max_enrolled=x.max_enrolled_boxes)

    def attach(self, services: LinkServices) -> None:
        """What the gateway hands its links when serving: the device registry for the enrolment,
        the activation codes for unknown boxes when enrolment is closed."""
        if services.enrolment is not None:
            self.ota.enrolment = services.enrolment
        if services.activations is not None:
            self.ota.activations = services.activations
        if services.device_tools is not None:
            self.tools = ToolServices(services.device_tools, self.actions)

    def owns_websocket(self, path: str) -> bool:
        return _same(path, self.ws_path)

    def owns_http(self, path: str) -> bool:
        return _same(path, self.ota_path) or self._is_activate(path)

    def _is_activate(self, path: str) -> bool:
        return _same(path, self.ota_path.rstrip("/") + "/activate")  # the firmware appends "activate"

    async def http(self, request: HttpRequest) -> HttpReply:
        if self._is_activate(request.path):
            return await self.ota.activate(request)
        return await self.ota.handle(request)

    def connection(self, ws: ServerConnection) -> DeviceConnection:
        return RoamingXiaozhiConnection(WebSocketChannel(ws, self.settings.max_frame_bytes), self.settings,
                                        self.emotions, tools=self.tools, opus_meter=self.opus_meter)

    def mqtt_udp(self, udp_bind: str, udp_port: int, udp_host: str = "") -> XiaozhiMqttUdp:
        """The boxes' MQTT+UDP transport (an extension of the MQTT link); the OTA answer then offers it."""
        self.ota.mqtt_udp = XiaozhiMqttUdp(self.settings, self.emotions, udp_bind, udp_port, udp_host, self.actions)
        return self.ota.mqtt_udp
