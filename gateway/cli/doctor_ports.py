"""`gateway doctor`'s port checks: every port `gateway run` opens is free, or held by a gateway
that answers on it (the README suggests running doctor beside the running gateway).

A port held by anything else is a FAIL naming the process and the config key to change.
"""

from __future__ import annotations

import errno
import socket
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from gateway.cli import gateway_probe
from gateway.cli.checks import FAIL, OK, Check
from gateway.cli.ports import PortHolder, holder_of
from gateway.config import GatewayConfig


@dataclass(frozen=True)
class Listener:
    what: str  # "WebSocket", "screens", ...
    host: str
    port: int
    kind: int  # socket.SOCK_STREAM or SOCK_DGRAM
    key: str  # the config key that sets the port
    probe: Callable[[], str]  # asks the gateway holding it; raises gateway_probe.ProbeFailed


def listeners(cfg: GatewayConfig) -> list[Listener]:
    """Every port `gateway run` opens, with how to ask a running gateway on it."""
    host, tcp, udp = cfg.server.host, socket.SOCK_STREAM, socket.SOCK_DGRAM
    ws_port, path = cfg.server.websocket_port, cfg.server.websocket_path
    ports = [Listener("WebSocket", host, ws_port, tcp, "server.websocket_port",
                      lambda: gateway_probe.websocket(host, ws_port, path))]
    s = cfg.screens
    if s.enabled:
        ports.append(Listener("screens", s.host, s.port, tcp, "screens.port",
                              lambda: gateway_probe.http_page(s.host, s.port, s.tls)))
    if cfg.mqtt.enabled and not cfg.mqtt.host:
        mqtt_port = cfg.mqtt.port
        ports.append(Listener("embedded MQTT broker", host, mqtt_port, tcp, "mqtt.port",
                              lambda: gateway_probe.mqtt(host, mqtt_port)))
    if cfg.coap.enabled:
        coap_port = cfg.coap.port
        ports.append(Listener("CoAP (UDP)", host, coap_port, udp, "coap.port",
                              lambda: gateway_probe.coap(host, coap_port)))
    x = cfg.xiaozhi
    if x.enabled and x.mqtt_udp and cfg.mqtt.enabled and not cfg.mqtt.host:  # the boxes' own small broker
        xz_port = x.mqtt_port
        ports.append(Listener("xiaozhi MQTT broker", host, xz_port, tcp, "xiaozhi.mqtt_port",
                              lambda: gateway_probe.mqtt(host, xz_port)))
    if x.enabled and x.mqtt_udp and cfg.mqtt.enabled:  # a datagram without a session gets no answer
        ports.append(Listener("xiaozhi UDP audio", host, x.udp_port, udp, "xiaozhi.udp_port",
                              lambda: "bound (audio datagrams are answered only within a box's session)"))
    return ports


def _held(where: str, listener: Listener, holder: PortHolder | None) -> Check:
    change = f"or set {listener.key} (or the host) in gateway.yaml"
    if holder is None or not holder.is_gateway:
        return Check(FAIL, f"{where} is in use by {holder or 'another process'}", f"stop that process {change}")
    try:
        answer = listener.probe()
    except gateway_probe.ProbeFailed as exc:
        return Check(FAIL, f"{where} is held by a gateway ({holder}) that does not answer: {exc}",
                     "see its log (`journalctl -u edge-voice-gateway` for the service) and restart it")
    return Check(OK, f"{where} is held by the running gateway (pid {holder.pid}), {answer}")


def port_checks(cfg: GatewayConfig) -> Iterator[Check]:
    for listener in listeners(cfg):
        host, port = listener.host, listener.port
        where = f"{listener.what} port {host}:{port}"
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        try:
            with socket.socket(family, listener.kind) as s:
                if listener.kind == socket.SOCK_STREAM:  # TIME_WAIT is no clash; on UDP it would hide a holder
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                s.bind((host, port))
        except OSError as exc:
            change = f"or set {listener.key} (or the host) in gateway.yaml"
            if exc.errno == errno.EADDRINUSE:
                yield _held(where, listener, holder_of(port, listener.kind))
            elif exc.errno == errno.EACCES:
                yield Check(FAIL, f"{where}: permission denied", f"use a port >= 1024 {change}")
            else:
                yield Check(FAIL, f"{where}: cannot bind ({exc.strerror})",
                            "the host must be an address of this machine (0.0.0.0 = all)")
            continue
        yield Check(OK, f"{where} is free")
