"""The ports a config listens on, and the check that no two listeners of one protocol share a port on
overlapping addresses (else the second link fails to listen only after the models loaded).

The list follows what `gateway run` opens (gateway/cli/doctor_ports.py and preflight.py; a test keeps
them equal). Port 0 (any free port) never clashes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gateway.config.sections import GatewayConfig

_ANY_ADDRESS = ("0.0.0.0", "::", "")  # listens on every address, so it overlaps with each


@dataclass(frozen=True)
class ListenPort:
    key: str  # the config key that sets the port, e.g. screens.port
    host: str
    port: int
    protocol: str  # tcp | udp


def listen_ports(cfg: GatewayConfig) -> list[ListenPort]:
    """Every port the config's links listen on (0 included)."""
    host, x, mqtt = cfg.server.host, cfg.xiaozhi, cfg.mqtt
    ports = [ListenPort("server.websocket_port", host, cfg.server.websocket_port, "tcp")]
    if cfg.screens.enabled:
        ports.append(ListenPort("screens.port", cfg.screens.host, cfg.screens.port, "tcp"))
    if mqtt.enabled and not mqtt.host:  # the embedded broker
        ports.append(ListenPort("mqtt.port", host, mqtt.port, "tcp"))
    if cfg.coap.enabled:
        ports.append(ListenPort("coap.port", host, cfg.coap.port, "udp"))
    if x.enabled and x.mqtt_udp and mqtt.enabled and not mqtt.host:  # the xiaozhi boxes' own small broker
        ports.append(ListenPort("xiaozhi.mqtt_port", host, x.mqtt_port, "tcp"))
    if x.enabled and x.mqtt_udp and mqtt.enabled:
        ports.append(ListenPort("xiaozhi.udp_port", host, x.udp_port, "udp"))
    if cfg.memory.enabled and cfg.mcp.http:
        ports.append(ListenPort("mcp.port", cfg.mcp.host, cfg.mcp.port, "tcp"))
    return ports


def _overlap(a: str, b: str) -> bool:
    return a == b or a in _ANY_ADDRESS or b in _ANY_ADDRESS


def port_clashes(ports: list[ListenPort]) -> list[str]:
    """One line per two listeners that cannot both listen: the same port and protocol on overlapping hosts."""
    clashes = []
    for i, a in enumerate(ports):
        for b in ports[i + 1:]:
            if a.port and a.port == b.port and a.protocol == b.protocol and _overlap(a.host, b.host):
                hosts = dict.fromkeys((a.host or "0.0.0.0", b.host or "0.0.0.0"))
                where = " and ".join(hosts)
                clashes.append(f"{a.key} and {b.key} are both {a.protocol.upper()} port {a.port} on {where}: "
                               f"give each its own port")
    return clashes
