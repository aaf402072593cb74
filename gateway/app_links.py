"""The links `gateway run` serves, built from the config, and where devices connect to them.

`default_links` builds the WebSocket link (with the xiaozhi endpoints on it), the LAN screens,
serial, MQTT (with the xiaozhi MQTT+UDP extension) and CoAP links as configured; the composition
root (gateway/app.py) serves them. `connect_hints` is the start-up banner's list of addresses.
"""

from __future__ import annotations

import logging
import socket
from typing import TYPE_CHECKING

from gateway.config import GatewayConfig
from gateway.devices.device_actions import DeviceActions
from gateway.links.base import DeviceLink
from gateway.links.coap import CoapLink
from gateway.links.limits import PeerLimits
from gateway.links.mqtt import MqttLink
from gateway.links.serial_link import SerialLink, SerialPort
from gateway.links.websocket import WebSocketLink
from gateway.links.xiaozhi.emotions import EmotionTable
from gateway.links.xiaozhi.endpoint import XiaozhiEndpoint, lan_address
from gateway.screens.access import screen_key
from gateway.screens.server import ScreensServer
from gateway.screens.tls import server_context

if TYPE_CHECKING:
    from gateway.cluster.node import ClusterNode

log = logging.getLogger("gateway.app")  # the start-up warnings, as before the split


def default_links(cfg: GatewayConfig, cluster: ClusterNode | None = None) -> list[DeviceLink]:
    """The configured links; `cluster`: the MQTT link serves as that member of a cluster."""
    s = cfg.server
    endpoints = []
    mqtt_extensions = []  # xiaozhi boxes on MQTT+UDP share the MQTT link's broker
    if cfg.xiaozhi.enabled:  # stock xiaozhi-esp32 boxes on the same port (OTA bootstrap + their WebSocket)
        emotions = EmotionTable.load(cfg.path(cfg.xiaozhi.emotions))
        actions = DeviceActions.load(cfg.path(cfg.xiaozhi.device_actions))
        endpoints.append(XiaozhiEndpoint.from_config(cfg.xiaozhi, emotions, s.max_frame_bytes, actions))
        if cfg.xiaozhi.mqtt_udp and cfg.mqtt.enabled:
            mqtt_extensions.append(endpoints[-1].mqtt_udp(s.host, cfg.xiaozhi.udp_port, cfg.xiaozhi.udp_host))
        elif cfg.xiaozhi.mqtt_udp:
            log.warning("xiaozhi.mqtt_udp is on but mqtt.enabled is off: boxes keep the WebSocket")
    d = cfg.devices
    limits = PeerLimits(s.max_sessions, s.max_sessions_per_peer, d.login_backoff_s, d.login_backoff_max_s,
                        d.max_readings_per_minute_per_peer)  # one per gateway: WebSocket, CoAP (and MQTT's count) share it
    ws_link = WebSocketLink(s.host, s.websocket_port, s.websocket_path, s.max_frame_bytes, endpoints, limits,
                            idle_s=s.session_idle_s or None, idle_probe_s=s.hello_timeout_s)
    links: list[DeviceLink] = [ws_link]
    if cfg.screens.enabled:
        sc = cfg.screens
        tls = server_context(cfg.path(sc.cert), cfg.path(sc.key)) if sc.tls else None
        links.append(ScreensServer(sc.host, sc.port, sc.path, sc.audio_cache, s.max_frame_bytes, tls,
                                   key=screen_key(cfg.path(sc.access_key)), limits=limits,  # /device as /ws
                                   idle_s=s.session_idle_s or None, idle_probe_s=s.hello_timeout_s))
    if cfg.serial.ports:
        ports = [SerialPort(p.port, p.baud) for p in cfg.serial.ports]
        links.append(SerialLink(ports, s.max_frame_bytes))
    if cfg.mqtt.enabled:
        m = cfg.mqtt
        links.append(MqttLink(m.host or s.host, m.port, topic_prefix=m.topic_prefix, protocol=m.protocol,
                              client_id=cluster.client_id if cluster is not None else m.client_id,
                              username=m.username or None, password=m.password or None, cluster=cluster,
                              max_frame_bytes=s.max_frame_bytes, embedded=not m.host,
                              inbox_messages=m.inbox_messages, offline_queue=m.offline_queue,
                              extensions=mqtt_extensions, extension_port=cfg.xiaozhi.mqtt_port,
                              broker_folder=cfg.path(cfg.devices.database).parent / "mosquitto",
                              limits=limits, idle_s=s.session_idle_s or None, idle_probe_s=s.hello_timeout_s))
    if cfg.coap.enabled:
        links.append(CoapLink(s.host, cfg.coap.port, s.max_frame_bytes, cfg.coap.outbox_bytes, cfg.coap.session_idle_s,
                              limits))
    return links


def connect_hints(cfg: GatewayConfig, port: int) -> list[str]:
    """Where devices connect, for the start-up banner."""
    path = cfg.server.websocket_path
    lan = cfg.server.host in ("0.0.0.0", "::", "")
    host = socket.gethostname() if lan else cfg.server.host
    if lan:
        hints = [f"ws://{host}:{port}{path}  (from the LAN)", f"ws://127.0.0.1:{port}{path}  (from this machine)"]
    else:
        hints = [f"ws://{host}:{port}{path}"]
    if cfg.mqtt.enabled:
        broker = f"{cfg.mqtt.host}:{cfg.mqtt.port}" if cfg.mqtt.host else f"{host}:{cfg.mqtt.port} (embedded broker)"
        hints.append(f"mqtt://{broker}  topics {cfg.mqtt.topic_prefix}/<device id>/up|down|status")
    if cfg.coap.enabled:
        hints.append(f"coap://{host}:{cfg.coap.port}/gw/<device id>/up  (observe .../down)")
    hints += [f"serial {p.port} at {p.baud} baud" for p in cfg.serial.ports]
    if cfg.xiaozhi.enabled:
        ota_host = (lan_address() or host) if lan else cfg.server.host
        hints.append(f"http://{ota_host}:{port}{cfg.xiaozhi.ota_path}  (xiaozhi-esp32 boxes: set this as their OTA URL)")
    return hints
