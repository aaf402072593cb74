"""The LAN screen server: the web page (a face that lip-syncs, and a browser voice box), the
Fay-compatible screen WebSocket, the sentences' audio over HTTP, and a device WebSocket for the
page's voice box (same origin, so it also works over https).

    GET /                 the page (gateway/screens/static/index.html)
    GET /voicebox.js      its script (speaks the device wire protocol over /device)
    GET /config.json      the paths, for the page
    GET /audio/ID.wav?key=K        the audio of a recent sentence (Fay's HttpValue; ID random)
    WS  /screen?device=ID&key=K    Fay "human" messages for one device or all
    WS  /device           a device connection (binary wire protocol), like the device link's

Watching and audio need the screen key K (gateway/screens/access.py): without it, or with a
wrong one, the audio is 401 and the screen WebSocket is closed with code 4401 and the reason,
each logged with the peer. The page and its script are served to anyone (they hold no data).
It is a device link (it serves /device) on `screens.host`:`screens.port`, within the same
per-address limits as the device WebSocket (`limits`, `idle_s`: gateway/app_links.py hands in
the device link's). With TLS (the default)
the port speaks https and http: the page asked by another machine over http is redirected to
https (browsers give the microphone only to secure pages); this machine and plain-ws screens
keep http.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import ssl
from pathlib import Path

from gateway.links.base import ConnectionHandler, LinkServices
from gateway.links.limits import PeerLimits
from gateway.links.web import TextSocket, WebServer
from gateway.log_safe import log_safe
from gateway.screens.access import key_matches
from gateway.screens.hub import ScreenHub

log = logging.getLogger(__name__)

STATIC = Path(__file__).parent / "static"
FILES = {"/": ("index.html", "text/html; charset=utf-8"),
         "/index.html": ("index.html", "text/html; charset=utf-8"),
         "/voicebox.js": ("voicebox.js", "text/javascript; charset=utf-8")}
PAGES = frozenset({"/", "/index.html"})  # with TLS: another machine asking over http is sent to https
AUDIO = re.compile(r"/audio/([A-Za-z0-9_-]{16,64})\.wav")
DEVICE_PATH = "/device"
KEY_REFUSED = 4401  # the screen WebSocket's close code for a missing or wrong key
KEY_HINT = "use the page URL of the start-up banner or `gateway screens key`"


class ScreensServer:
    name = "screens"

    def __init__(self, host: str, port: int, path: str = "/screen", audio_cache: int = 64,
                 max_frame_bytes: int = 65536, tls: ssl.SSLContext | None = None, *, key: str,
                 limits: PeerLimits | None = None, idle_s: float | None = None, idle_probe_s: float = 10.0) -> None:
        if not key:
            raise ValueError("the screens need a screen key")
        self._key = key
        self.hub = ScreenHub(audio_cache, audio_query=f"?key={key}")
        self.web = WebServer(host, port, path, self._route, self._screen, DEVICE_PATH, max_frame_bytes, tls,
                             pages=PAGES, limits=limits, idle_s=idle_s, idle_probe_s=idle_probe_s)
        self.scheme = "https" if tls is not None else "http"  # for other machines (this one: http too)
        self._path = path

    @property
    def port(self) -> int:
        return self.web.port

    def _refusal(self, given: str | None) -> str:
        return ("screen-key-missing: add ?key=<screen key>" if given is None
                else "screen-key-wrong: not this gateway's screen key") + f"; {KEY_HINT}"  # < 123 bytes

    async def _screen(self, sock: TextSocket) -> None:
        given = sock.query.get("key")
        if not key_matches(given, self._key):
            reason = self._refusal(given)
            log.warning("%s: screen refused (device %s): %s", sock.peer, log_safe(sock.query.get("device", "all")),
                        reason.split(";")[0])
            await sock.close(KEY_REFUSED, reason[:120])  # a close reason is at most 123 bytes
            return
        await self.hub.serve_screen(sock)

    def _route(self, path: str, query: dict[str, str], peer: str) -> tuple[int, str, bytes] | None:
        if path in FILES:
            name, content_type = FILES[path]
            return 200, content_type, (STATIC / name).read_bytes()
        if path == "/config.json":
            body = {"device_path": DEVICE_PATH, "screen_path": self._path}
            return 200, "application/json", json.dumps(body).encode()
        if m := AUDIO.fullmatch(path):
            if not key_matches(query.get("key"), self._key):
                reason = self._refusal(query.get("key"))
                log.warning("screen %s: audio %s refused: %s", peer, path, reason.split(";")[0])
                return 401, "text/plain; charset=utf-8", (reason + "\n").encode()
            wav = self.hub.audio(m.group(1))
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
            console = services.console if services is not None else None  # /console (gateway/console/)
            tg.create_task(self.web.serve(handler, ready, console))
