"""Composition root: the one place that builds the engines, brain, memory and links and wires them.

`load_runner` loads the models; `build_gateway` builds the rest from the config (the memory and
the default links of gateway/app_links.py included); `Gateway.serve` runs it all in one TaskGroup. Benchmarks and tests
construct `Gateway(cfg, runner, links, memory=...)` directly with the parts they want.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np

from gateway.audio.pcm import int16_to_float, resample
from gateway.brain.factory import build_brain, build_mcp_clients, drain_brain
from gateway.app_links import default_links
from gateway.bus import EventBus
from gateway.config import ConfigError, GatewayConfig
from gateway.console.api_devices import ClusterView
from gateway.console.build import build_console
from gateway.console.log_tail import LogTail
from gateway.devices.activation import ActivationStore, Activations
from gateway.devices.auth import Authenticator, SqliteDeviceRegistry
from gateway.devices.database import Database
from gateway.devices.device_tools import DeviceTools
from gateway.devices.reading_log import ReadingLog
from gateway.devices.reading_list import ReadingList, SqliteReadingList
from gateway.devices.reading_store import ReadingStore
from gateway.devices.reading_writer import ReadingWriter
from gateway.devices.readings import ReadingService, ReadingStored, SqliteReadingStore
from gateway.devices.registry import SessionRegistry
from gateway.devices.retention import Pruner, ReadingRetention, SqlitePruner
from gateway.devices.session import SessionServices, serve_device
from gateway.engines.factory import load_engines
from gateway.engines.runner import EngineRunner
from gateway.engines.tts_cache import TtsCache
from gateway.engines.wake_word import MicroWakeWords
from gateway.expression.service import ExpressionService
from gateway.links.base import DeviceConnection, DeviceLink, LinkServices
from gateway.memory.reading_feed import ReadingFeed
from gateway.memory.alerts import speak_alerts
from gateway.memory.device_users import DevicePeople
from gateway.devices.people import PeopleStore, SqlitePeople, follow
from gateway.memory.events import Alert
from gateway.memory.rules import RuleEngine, install_rules
from gateway.memory.scheduler import MemoryScheduler
from gateway.memory.service import MemoryService
from gateway.mcp_server.devices import GatewayDevices
from gateway.links.limits import throttle_accept_errors
from gateway.engines.store import ModelStore

if TYPE_CHECKING:
    from gateway.cluster.node import ClusterNode
    from gateway.storage.backend import PostgresBackend

log = logging.getLogger(__name__)


def load_runner(cfg: GatewayConfig, progress: Callable[[str], None]) -> EngineRunner:
    """Load (and on first use prepare) every model, warm them up, and put them on their threads."""
    started = time.monotonic()
    wake = None
    if cfg.listen.needs_wake_word():  # first: a broken or unknown model stops start-up at once, named
        wake = MicroWakeWords(cfg.listen.wake_words, cfg.listen.threshold)
        progress(f"wake words: {', '.join(wake.words)}")
    engines = load_engines(cfg, ModelStore(cfg), progress)
    # Warm the ASR on real speech (the TTS says a phrase): noise alone leaves the decoder's first
    # real run slow, and this way the memory the gateway holds at idle is its steady state.
    chunks = list(engines.tts.synthesize("Hello, this is a warm up."))
    speech = np.concatenate([int16_to_float(c.pcm) for c in chunks])
    engines.asr.transcribe(resample(speech, chunks[0].sample_rate, engines.asr.sample_rate))
    progress(f"models ready in {time.monotonic() - started:.1f} s")
    e = cfg.engines
    cache = TtsCache(cfg.tts.cache_seconds) if cfg.tts.cache_seconds > 0 else None
    return EngineRunner(engines.vad, engines.asr, engines.tts, asr_workers=e.asr_workers,
                        tts_workers=e.tts_workers, max_waiting_turns=e.max_waiting_turns, wake=wake,
                        tts_cache=cache)


@dataclass
class Gateway:
    cfg: GatewayConfig
    runner: EngineRunner
    links: list[DeviceLink]
    registry: SessionRegistry = field(default_factory=SessionRegistry)
    bus: EventBus = field(default_factory=EventBus)
    memory: MemoryService | None = None  # started and closed by serve()
    cluster: ClusterNode | None = None  # cluster.enabled: this member's node (its MQTT link runs it)
    # storage.backend postgres: devices, readings and the memory's feed on it (opened by serve);
    # None: the SQLite database devices.database
    postgres: PostgresBackend | None = None

    def __post_init__(self) -> None:
        # device -> person: memory.users with the console's changes (loaded by serve), one live
        # mapping for the memory, the brain's histories, the alerts and the console
        self.people = DevicePeople(self.cfg.memory.users)
        if self.memory is not None:
            self.memory.users = self.people
        self.mcp_clients = build_mcp_clients(self.cfg)  # external MCP servers' tools (connected by serve)
        self.device_tools = DeviceTools(self.cfg.xiaozhi.tool_timeout_s)  # connected devices' own tools
        pg = self.postgres
        # the LLM brain's histories: RAM only on a single box, also in PostgreSQL when shared
        self.brain = build_brain(self.cfg, self.memory, self.registry.connected, self.mcp_clients, self.device_tools,
                                 users=self.people, history_store=pg.history if pg is not None else None)
        self.db = Database(self.cfg.path(self.cfg.devices.database))
        ttl = self.cfg.xiaozhi.activation_ttl_s
        self.people_store: PeopleStore = pg.people if pg is not None else SqlitePeople(self.db)
        activations: ActivationStore = pg.activations(ttl) if pg is not None else Activations(self.db, ttl)
        reading_list: ReadingList = pg.reading_list if pg is not None else SqliteReadingList(self.db)
        if self.cfg.devices.open_enrolment:
            log.warning("devices.open_enrolment is on: unregistered devices may connect (fine on a trusted LAN)")
        # on PostgreSQL the readings of every gateway: pruned by one of them at a time (serve)
        if pg is not None:
            self.reading_store: ReadingStore = pg.readings
            self.reading_writer: ReadingWriter | None = None
            pruner: Pruner = pg.pruner(feeds_memory=self.memory is not None)
        else:  # the readings' writer process: the readings table's one writer, the prune's batches too
            sqlite_readings = SqliteReadingStore(self.db)
            self.reading_store, self.reading_writer = sqlite_readings, sqlite_readings.writer
            pruner = SqlitePruner(sqlite_readings.writer)
        self.readings = ReadingService(self.reading_store, self.bus,
                                       per_minute=self.cfg.devices.max_readings_per_minute)
        device_registry = pg.devices if pg is not None else SqliteDeviceRegistry(self.db)
        self.auth = Authenticator(device_registry, self.cfg.devices.open_enrolment)
        days = self.cfg.devices.readings_retention_days  # 0: keep readings forever
        self.retention = ReadingRetention(pruner, days) if days else None
        # What each link may take when served: the LAN screens follow the bus, the embedded MQTT
        # broker checks device logins against the registry, xiaozhi boxes enrol through it.
        self.log_tail = LogTail()  # the console's health page shows the last log lines (attached by serve)
        console = self.console = build_console(self.cfg, device_registry, self.registry, self.memory, self.log_tail, self.people,
                                               self.bus, activations=activations, people_store=self.people_store,
                                               readings=reading_list,
                                               cluster=ClusterView(self.cluster.me, self.cluster.devices)
                                               if self.cluster is not None else None)
        self.link_services = LinkServices(bus=self.bus, check_credentials=self.auth.check_credentials,
                                          broker_logins=self.auth.broker_logins,
                                          serve_authenticated=self._handle_authenticated,
                                          enrolment=self.auth,
                                          activations=activations,
                                          device_tools=self.device_tools, console=console)
        self.services = SessionServices(
            cfg=self.cfg,
            runner=self.runner,
            brain=self.brain,
            registry=self.registry,
            bus=self.bus,  # the turn events (gateway/voice/events.py): screens, `gateway bench` metrics
            auth=self.auth,
            readings=self.readings,
            expression=ExpressionService.from_config(self.cfg, self.bus),
            # cluster mode: WebSocket and CoAP sessions hold their device's lease
            leases=self.cluster.roaming if self.cluster is not None else None,
        )

    async def _handle(self, conn: DeviceConnection) -> None:
        await serve_device(conn, self.services)

    async def _handle_authenticated(self, conn: DeviceConnection) -> None:
        """A device its link authenticated (a broker login checked against the registry)."""
        await serve_device(conn, replace(self.services, auth=None))

    async def serve(self, ready: asyncio.Event | None = None) -> None:
        """Run every link until cancelled; `ready` is set once all of them listen. A link that
        cannot listen (OSError) ends serve with that error, so a caller waiting for `ready` must
        also watch this coroutine (see gateway/cli/run.py)."""
        events = [asyncio.Event() for _ in self.links]
        throttle_accept_errors(asyncio.get_running_loop())  # EMFILE: one line per interval, no traceback each
        if self.postgres is not None:  # schema migrated on a thread; a ConfigError when unreachable
            await self.postgres.open(log.info)
        try:
            await self.reading_store.start()  # (SQLite: its writer process)
            await self._serve(events, ready)
        finally:
            await self.reading_store.close()
            if self.postgres is not None:
                await self.postgres.close()

    async def _serve(self, events: list[asyncio.Event], ready: asyncio.Event | None) -> None:
        self.people.load(await self.people_store.load())  # the console's device -> person changes
        if self.memory is not None:
            await self.memory.start()
        logging.getLogger().addHandler(self.log_tail)
        try:
            async with asyncio.TaskGroup() as tg:
                if self.memory is not None:
                    tg.create_task(self._serve_memory(self.memory), name="memory")
                if self.mcp_clients is not None:  # in the background: a missing server delays nothing
                    tg.create_task(self.mcp_clients.run(), name="mcp-clients")
                if self.retention is not None and self.postgres is None:
                    tg.create_task(self.retention.run(), name="readings-retention")
                elif self.retention is not None:  # one gateway of those sharing the database prunes
                    tg.create_task(self.postgres.retention_job.run(self.retention.run), name="readings-retention")
                if self.postgres is not None:  # the other gateways' consoles change the mapping too
                    tg.create_task(follow(self.people_store, self.people), name="people-follow")
                    # every member's alerts onto this one's bus: its devices say them, its screens show them
                    tg.create_task(self.postgres.alert_relay.run(self.bus.publish), name="alert-relay")
                if self.console is not None:  # the Talk page's live log of the turns
                    tg.create_task(self.console.run(), name="console")
                for link, event in zip(self.links, events):
                    tg.create_task(self._serve_link(link, event), name=f"link-{link.name}")
                await asyncio.gather(*(e.wait() for e in events))
                if ready is not None:
                    ready.set()
        finally:  # every task has ended: the brain's last memory writes, the brain, then the memory itself
            logging.getLogger().removeHandler(self.log_tail)
            await drain_brain(self.brain)
            await self.brain.close()
            if self.memory is not None:
                await self.memory.close()

    async def _serve_link(self, link: DeviceLink, ready: asyncio.Event) -> None:
        try:
            await link.serve(self._handle, ready, self.link_services)
        except* OSError as failed:  # (a link with its own TaskGroup raises it in a group)
            log.error("link %s: listen-failed: %s", link.name, "; ".join(str(e) for e in failed.exceptions))
            raise
        raise RuntimeError(f"link {link.name} stopped serving")  # links serve until cancelled


    async def _serve_memory(self, memory: MemoryService) -> None:
        """Readings -> memories, alerts, the daily reflection, and (mcp.http) the MCP endpoint."""
        wake = self.bus.notify(ReadingStored, name="memory-readings")  # the feed reads the readings table
        alerts = self.bus.subscribe(Alert, name="memory-alerts")
        devices = GatewayDevices(self.registry, self.device_tools, self.cluster)
        m = self.cfg.memory
        pg = self.postgres
        runs = pg.run_log if pg is not None else None  # None: in RAM (one gateway)
        # on PostgreSQL the alerts go to every member (NOTIFY), each says them on its own devices
        relay = pg.alert_relay if pg is not None else None
        rules = RuleEngine(memory, relay.publish if relay is not None else self.bus.publish,
                           lambda user: tuple(d for d, u in self.people.items() if u == user), runs=runs)
        scheduler = MemoryScheduler(memory, rules, reflection_time=m.reflection_time, portrait_time=m.portrait_time,
                                    runs=runs)
        source = self.postgres.reading_log if self.postgres is not None else ReadingLog(self.db)
        self.reading_feed = ReadingFeed(memory, source, rules, on_remembered=self.bus.publish)

        try:
            if pg is None:
                await install_rules(memory, m.rules)
            else:
                async with pg.installing_rules():  # members starting together: written once
                    await install_rules(memory, m.rules)
            async with asyncio.TaskGroup() as tg:
                if self.postgres is None:
                    tg.create_task(self.reading_feed.run(wake), name="memory-readings")
                    tg.create_task(scheduler.run(), name="memory-scheduler")
                else:  # one feed and one scheduler for every gateway sharing the database
                    from gateway.storage.reading_log import PollingWake  # woken by the others' readings too
                    feed, polled = self.reading_feed, PollingWake(wake)
                    tg.create_task(self.postgres.feed_job.run(lambda: feed.run(polled)), name="memory-feed-leader")
                    tg.create_task(self.postgres.schedule_job.run(scheduler.run), name="memory-scheduler")
                tg.create_task(speak_alerts(alerts, devices.connected, devices.say, devices.can_speak), name="memory-alerts")
                if self.cfg.mcp.http:
                    from gateway.mcp_server.http import serve_http
                    from gateway.mcp_server.tools import McpDeps, build_server

                    server = build_server(McpDeps(memory, devices))
                    tg.create_task(serve_http(server, self.cfg.mcp.host, self.cfg.mcp.port, self.cfg.mcp.token))
        finally:
            wake.close()
            alerts.close()


def build_gateway(cfg: GatewayConfig, runner: EngineRunner, progress: Callable[[str], None],
                  links: list[DeviceLink] | None = None) -> Gateway:
    """The gateway `gateway run` serves: the memory (memory.enabled; loads its embedding model)
    and the configured links (`default_links`) unless `links` are given."""
    postgres = postgres_backend(cfg, os.environ) if cfg.storage.backend == "postgres" else None
    open_store = postgres.open_memory_store if postgres is not None else None
    memory = MemoryService.from_config(cfg, progress=progress, open_store=open_store) if cfg.memory.enabled else None
    cluster = None
    if cfg.cluster.enabled:  # one of several gateways (docs/SCALE-OUT.md); needs the postgres extra
        from gateway.cluster.build import build_node

        cluster = build_node(cfg, os.environ)
    return Gateway(cfg, runner, default_links(cfg, cluster) if links is None else links, memory=memory,
                   cluster=cluster, postgres=postgres)


def postgres_backend(cfg: GatewayConfig, environ: Mapping[str, str]) -> PostgresBackend:
    """storage.backend postgres: the backend on the DSN from the environment (no I/O yet)."""
    try:
        from gateway.storage.backend import PostgresBackend
    except ImportError as exc:  # psycopg: the postgres extra
        raise ConfigError(f"storage.backend postgres needs the PostgreSQL driver ({exc.name}): "
                          ".venv/bin/pip install -e '.[postgres]'") from None
    from gateway.storage.dsn import postgres_dsn
    return PostgresBackend(postgres_dsn(cfg.storage, environ), cfg.storage)
