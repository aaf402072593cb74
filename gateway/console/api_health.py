"""Console API for health: version, uptime, the models configured, each listening port, which
devices are connected on which link, and the last log lines.

    GET health
    GET health/checks   what `gateway doctor` checks, without loading the engines again (takes seconds)
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gateway import __version__
from gateway.console.log_tail import LogTail
from gateway.console.routes import ApiError, ApiRequest, Routes
from gateway.devices.registry import SessionRegistry

if TYPE_CHECKING:  # (gateway.cli's package imports gateway.app, which builds the console)
    from gateway.cli.checks import Check


@dataclass(frozen=True)
class Port:
    what: str  # "device WebSocket", "screens + console", ...
    key: str  # the config key, e.g. "server.websocket_port"
    address: str  # "0.0.0.0:8765"


class HealthApi:
    def __init__(self, registry: SessionRegistry, ports: list[Port], models: dict[str, str], log_tail: LogTail,
                 checks: Callable[[], list[Check]], clock: Callable[[], float] = time.time) -> None:
        self._registry = registry
        self._ports = ports
        self._models = models
        self._log = log_tail
        self._checks = checks
        self._running: asyncio.Lock = asyncio.Lock()  # one run at a time
        self._clock = clock
        self._started = clock()

    def routes(self) -> Routes:
        return {("GET", "health"): self.health, ("GET", "health/checks"): self.checks}

    async def checks(self, request: ApiRequest) -> dict[str, Any]:
        async with self._running:
            found = await asyncio.to_thread(self._checks)
        return {"checks": [{"status": c.status, "what": c.what, "fix": c.fix} for c in found]}

    async def health(self, request: ApiRequest) -> dict[str, Any]:
        lines = request.query.get("lines", "50")
        if not lines.isdigit() or not 1 <= int(lines) <= 200:
            raise ApiError(400, "lines: a number from 1 to 200", "lines")
        links: dict[str, list[str]] = {}
        for device_id in self._registry.connected():
            conn = self._registry.get(device_id)
            links.setdefault(conn.peer.split(" ", 1)[0] if conn else "?", []).append(device_id)
        return {"version": __version__, "uptime_s": round(self._clock() - self._started),
                "models": self._models, "ports": [p.__dict__ for p in self._ports],
                "links": links, "log": self._log.lines(int(lines))}
