"""The LAN screen server: the web page (a face that lip-syncs, and a browser voice box), the
Fay-compatible screen WebSocket, the sentences' audio over HTTP, and a device WebSocket for the
page's voice box (same origin, so it also works over https).

    GET /                 the page (gateway/screens/static/index.html)
    GET /voicebox.js      its script (speaks the device wire protocol over /device)
    GET /config.json      the paths, for the page
    GET /audio/N.wav      the audio of a recent sentence (Fay's HttpValue)
    WS  /screen?device=ID Fay "human" messages for one device or all
    WS  /device           a device connection (binary wire protocol), like the device link's

It is a device link (it serves /device) on `screens.host`:`screens.port`, http or https.
"""

from __future__ import annotations

import asyncio
import json
import re
import ssl
from pathlib import Path

from gateway.links.base import ConnectionHandler, LinkServices
from gateway.links.web import WebServer
from gateway.screens.hub import ScreenHub

STATIC = Path(__file__).parent / "static"
FILES = {"/": ("index.html", "text/html; charset=utf-8"),
         "/index.html": ("index.html", "text/html; charset=utf-8"),
         "/voicebox.js": ("voicebox.js", "text/javascript; charset=utf-8")}
AUDIO = re.compile(r"/audio/(\d{1,12})\.wav")
DEVICE_PATH = "/device"


class ScreensServer:
    name = "screens"

    def __init__(self, host: str, port: int, path: str = "/screen", audio_cache: int = 64,
                 max_frame_bytes: int = 65536, tls: ssl.SSLContext | None = None) -> None:
        self.hub = ScreenHub(audio_cache)
        self.web = WebServer(host, port, path, self._route, self.hub.serve_screen, DEVICE_PATH, max_frame_bytes, tls)
        self.scheme = self.hub.scheme = "https" if tls is not None else "http"
        self._path = path

    @property
    def port(self) -> int:
        return self.web.port

    def _route(self, path: str, query: dict[str, str]) -> tuple[int, str, bytes] | None:
        if path in FILES:
            name, content_type = FILES[path]
            return 200, content_type, (STATIC / name).read_bytes()
        if path == "/config.json":
            body = {"device_path": DEVICE_PATH, "screen_path": self._path}
            return 200, "application/json", json.dumps(body).encode()
        if m := AUDIO.fullmatch(path):
            wav = self.hub.audio(int(m.group(1)))
            return (200, "audio/wav", wav) if wav is not None else None
        return None

    async def serve(self, handler: ConnectionHandler | None = None, ready: asyncio.Event | None = None,
                    services: LinkServices | None = None) -> None:
        """Serve until cancelled; `handler` runs the page's voice box connections (/device). The
        screens follow the sentences, transcripts and alerts on `services.bus`."""
        bus = services.bus if services is not None else None
        async with asyncio.TaskGroup() as tg:
            if bus is not None:
                tg.create_task(self.hub.consume(bus), name="screens-hub")
            tg.create_task(self.web.serve(handler, ready))
