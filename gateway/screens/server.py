"""The LAN screen server: the web page (a face that lip-syncs, and a browser voice box), the
Fay-compatible screen WebSocket, and the sentences' audio over HTTP.

    GET /                 the page (gateway/screens/static/index.html)
    GET /voicebox.js      its script (speaks the device wire protocol over the device WebSocket)
    GET /config.json      where the device WebSocket is, for the page
    GET /audio/N.wav      the audio of a recent sentence (Fay's HttpValue)
    WS  /screen?device=ID Fay "human" messages for one device or all

It runs beside the device links (it is started like one), on `screens.host`:`screens.port`.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable
from pathlib import Path

from gateway.bus import EventBus
from gateway.links.base import ConnectionHandler
from gateway.links.web import WebServer
from gateway.screens.hub import ScreenHub

STATIC = Path(__file__).parent / "static"
FILES = {"/": ("index.html", "text/html; charset=utf-8"),
         "/index.html": ("index.html", "text/html; charset=utf-8"),
         "/voicebox.js": ("voicebox.js", "text/javascript; charset=utf-8")}
AUDIO = re.compile(r"/audio/(\d{1,12})\.wav")


class ScreensServer:
    name = "screens"

    def __init__(self, host: str, port: int, path: str, device_port: Callable[[], int], device_path: str,
                 audio_cache: int = 64) -> None:
        self.hub = ScreenHub(audio_cache)
        self.web = WebServer(host, port, path, self._route, self.hub.serve_screen)
        self._device_port = device_port
        self._device_path = device_path
        self._path = path
        self._bus: EventBus | None = None

    @property
    def port(self) -> int:
        return self.web.port

    def attach_bus(self, bus: EventBus) -> None:
        self._bus = bus

    def _route(self, path: str, query: dict[str, str]) -> tuple[int, str, bytes] | None:
        if path in FILES:
            name, content_type = FILES[path]
            return 200, content_type, (STATIC / name).read_bytes()
        if path == "/config.json":
            body = {"device_port": self._device_port(), "device_path": self._device_path, "screen_path": self._path}
            return 200, "application/json", json.dumps(body).encode()
        if m := AUDIO.fullmatch(path):
            wav = self.hub.audio(int(m.group(1)))
            return (200, "audio/wav", wav) if wav is not None else None
        return None

    async def serve(self, handler: ConnectionHandler | None = None, ready: asyncio.Event | None = None) -> None:
        """Serve until cancelled (`handler` is unused: devices use the device links)."""
        async with asyncio.TaskGroup() as tg:
            if self._bus is not None:
                tg.create_task(self.hub.consume(self._bus))
            tg.create_task(self.web.serve(ready))
