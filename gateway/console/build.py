"""Builds the console from the config and the gateway's own services (called by gateway/app.py)."""

from __future__ import annotations

from functools import partial

from gateway.bus import EventBus
from gateway.config import GatewayConfig
from gateway.console.api_actions import ActionsApi
from gateway.console.api_devices import ClusterView, DeviceSettings, DevicesApi
from gateway.console.api_health import HealthApi, Port
from gateway.console.api_memory import MemoryApi
from gateway.console.api_profile import ProfileApi
from gateway.console.api_readings import ReadingsApi
from gateway.console.api_replies import RepliesApi
from gateway.console.api_talk import TalkApi
from gateway.console.api_rules import RulesApi
from gateway.console.log_tail import LogTail
from gateway.console.password import PasswordFile
from gateway.console.server import ConsoleServer
from gateway.console.talk_log import TalkLog
from gateway.console.sessions import Sessions, store_beside
from gateway.console.throttle import LoginThrottle
from gateway.devices.activation import ActivationStore
from gateway.devices.device_registry import DeviceRegistry
from gateway.devices.people import PeopleStore
from gateway.devices.reading_list import ReadingList
from gateway.devices.device_actions import DeviceActions
from gateway.expression.hints import HintMap
from gateway.devices.registry import SessionRegistry
from gateway.memory.device_users import DevicePeople, user_of
from gateway.memory.rule_book import RuleBook
from gateway.memory.service import MemoryService


def _ports(cfg: GatewayConfig) -> list[Port]:
    s = cfg.server
    ports = [Port("device WebSocket", "server.websocket_port", f"{s.host}:{s.websocket_port}")]
    if cfg.screens.enabled:
        ports.append(Port("screens + console", "screens.port", f"{cfg.screens.host}:{cfg.screens.port}"))
    if cfg.mqtt.enabled:
        ports.append(Port("MQTT broker" if not cfg.mqtt.host else "MQTT (external broker)", "mqtt.port",
                          f"{cfg.mqtt.host or s.host}:{cfg.mqtt.port}"))
    if cfg.coap.enabled:
        ports.append(Port("CoAP", "coap.port", f"{s.host}:{cfg.coap.port}"))
    if cfg.mcp.http:
        ports.append(Port("MCP over HTTP", "mcp.port", f"{cfg.mcp.host}:{cfg.mcp.port}"))
    ports += [Port("serial", "serial.ports", f"{p.port} at {p.baud} baud") for p in cfg.serial.ports]
    return ports


def build_console(cfg: GatewayConfig, devices: DeviceRegistry, registry: SessionRegistry, memory: MemoryService | None,
                  log_tail: LogTail, people: DevicePeople, bus: EventBus, *, activations: ActivationStore,
                  people_store: PeopleStore, readings: ReadingList,
                  cluster: ClusterView | None = None) -> ConsoleServer | None:
    """The console (None when console.enabled or screens.enabled is off). Until an admin password
    is set (`gateway console password`, or `gateway run` makes one) every login is refused.
    `people`: the gateway's live device -> person mapping, which the Devices page changes (and
    stores in `people_store`). `bus`: the turn events the Talk page shows live (read by the
    console's `run`, Gateway.serve runs it). `devices`, `activations`, `readings`: the stores the
    Devices and Readings pages use (SQLite's, or PostgreSQL's with storage.backend postgres).
    `cluster` (cluster mode): the Devices page names the member serving each device."""
    c = cfg.console
    if not c.enabled or not cfg.screens.enabled:
        return None
    password = PasswordFile(cfg.path(c.password_file))
    from gateway.cli.doctor import checks_without_engines  # here: gateway.cli's package imports gateway.app
    m = cfg.memory
    person_of = partial(user_of, users=people, default_user=m.default_user, isolate_by_user=m.isolate_by_user)

    async def rules_of(person: str) -> list:
        return await memory.active_rules(person) if memory is not None else []

    settings = DeviceSettings(cfg.server.websocket_port, cfg.server.websocket_path, cfg.devices.open_enrolment,
                              cfg.xiaozhi.activation_ttl_s, person_of, people)
    models = {"asr": f"{cfg.asr.engine} {cfg.asr.model}", "tts": f"{cfg.tts.engine} {cfg.tts.voice}",
              "memory": m.embedding if m.enabled else "off"}
    routes = {**DevicesApi(devices, registry, settings, activations, people_store, cluster=cluster).routes(),
              **ReadingsApi(readings, person_of, rules_of, people).routes(),
              **HealthApi(registry, _ports(cfg), models, log_tail, partial(checks_without_engines, cfg)).routes(), **MemoryApi(memory, people).routes(),
              **RulesApi(RuleBook(memory) if memory is not None else None).routes(), **ProfileApi(memory).routes(),
              **RepliesApi(cfg.path(cfg.brain.replies)).routes()}
    hints, device_actions = HintMap(cfg.path(cfg.expression.hints)), cfg.path(cfg.xiaozhi.device_actions)

    def action_codes_used() -> dict[str, set[str]]:  # what names an action code besides the rules
        return {str(hints.path): hints.action_codes(), str(device_actions): set(DeviceActions.load(device_actions).calls)}

    routes |= ActionsApi(cfg.path(cfg.expression.action_rules), action_codes_used).routes()
    talk = TalkApi(talk_log := TalkLog(person_of, c.talk_turns))
    routes |= talk.routes()
    return ConsoleServer(password, Sessions(c.session_hours * 3600, store=store_beside(password.path)), LoginThrottle(c.max_failed_logins), routes,
                         tls_available=cfg.screens.tls, live=talk.live, background=[partial(talk_log.consume, bus)])
