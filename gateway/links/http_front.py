"""Plain HTTP requests other than GET on the WebSocket port (the xiaozhi boxes POST their OTA check).

websockets answers only GET (upgrades, and `process_request` for plain GETs) and refuses any
other method before a hook could see it. `HttpFrontConnection` is the websockets connection with
a look at the request line first: a GET goes on to websockets unchanged; another method (POST)
is read here (headers, a body of at most `max_body` bytes) and answered by `handler`, then the
connection is closed. A peer that sends no complete request within `timeout` s is dropped.
The task that answers is owned by the websockets server's handler of the connection: its
`handshake` waits, in HTTP mode, until the connection is gone, and cancels and awaits that task.
Relies on websockets 15's asyncio `ServerConnection` being an asyncio Protocol (pinned <16).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from http import HTTPStatus
from typing import TYPE_CHECKING, Protocol

from websockets.asyncio.server import ServerConnection
from websockets.datastructures import Headers

if TYPE_CHECKING:
    from gateway.links.web import TextSocket

log = logging.getLogger(__name__)

MAX_HEAD = 16384


@dataclass(frozen=True)
class HttpRequest:
    method: str
    path: str  # without the query string
    headers: Headers
    body: bytes
    local: tuple[str, int]  # the address the request came in on (the gateway's side)
    remote: tuple[str, int]
    query: str = ""  # the query string, without the "?"
    secure: bool = False  # it came over TLS


@dataclass(frozen=True)
class HttpReply:
    status: int
    body: bytes
    content_type: str = "text/plain; charset=utf-8"
    headers: tuple[tuple[str, str], ...] = ()  # more response headers (Set-Cookie, ...)

    def encode(self) -> bytes:
        phrase = HTTPStatus(self.status).phrase
        more = "".join(f"{name}: {value}\r\n" for name, value in self.headers)
        head = (f"HTTP/1.1 {self.status} {phrase}\r\nContent-Type: {self.content_type}\r\n"
                f"Content-Length: {len(self.body)}\r\n{more}Connection: close\r\n\r\n")
        return head.encode("ascii") + self.body


HttpHandler = Callable[[HttpRequest], Awaitable[HttpReply]]


class HttpMount(Protocol):
    """Pages and an API under one path prefix, any method, seeing the headers (the console, served
    by the screen server: gateway/links/web.py)."""

    prefix: str  # e.g. "/console": it owns the prefix and everything below "/console/"

    async def http(self, request: HttpRequest) -> HttpReply: ...

    async def upgrade(self, request: HttpRequest) -> HttpReply | None:
        """A WebSocket upgrade asked under the prefix: None accepts it (then `socket` serves it),
        a reply refuses it (401, 403, 404...) before the handshake."""
        ...

    async def socket(self, sock: TextSocket) -> None:
        """Serve an accepted WebSocket (JSON text frames) until it closes."""
        ...


class HttpFrontConnection(ServerConnection):
    def __init__(self, *args, http_handler: HttpHandler, max_body: int = 65536, timeout: float = 10.0, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._handler = http_handler
        self._max_body = max_body
        self._timeout = timeout
        self._mode = "sniff"  # -> "ws" (websockets takes over) or "http" (answered here)
        self._buf = bytearray()
        self._front: asyncio.Transport | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._task: asyncio.Task[None] | None = None  # answers a plain HTTP request (owned by `handshake`)
        self._sniffed = asyncio.Event()  # the mode is known (or the connection went first)
        self._gone = asyncio.Event()  # an HTTP-mode connection is closed

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._front = transport  # type: ignore[assignment]
        self.transport = transport  # type: ignore[assignment]  # the server's handler aborts it at the end
        self._timer = asyncio.get_running_loop().call_later(self._timeout, self._expire)

    async def handshake(self, *args, **kwargs) -> None:  # type: ignore[override]
        """WebSocket: websockets' handshake. A plain HTTP request: wait until it was answered and the
        connection closed (the answering task cancelled and awaited here); the server's handler then
        ends, as after a rejected handshake."""
        await self._sniffed.wait()
        if self._mode == "ws":
            await super().handshake(*args, **kwargs)
            return
        try:
            await self._gone.wait()
        finally:
            if self._task is not None:
                self._task.cancel()
                await asyncio.gather(self._task, return_exceptions=True)
            if self._front is not None and not self._front.is_closing():
                self._front.close()  # the server's open_timeout ended the wait first

    def _expire(self) -> None:
        if self._mode != "ws" and self._front is not None:
            log.warning("http %s: no complete request within %.0f s; closed", self._peer(), self._timeout)
            self._front.close()

    def _peer(self) -> str:
        assert self._front is not None
        address = self._front.get_extra_info("peername") or ("?", 0)
        return f"{address[0]}:{address[1]}"

    def data_received(self, data: bytes) -> None:
        if self._mode == "ws":
            super().data_received(data)
            return
        self._buf += data
        if self._mode == "sniff":
            method, space, _ = bytes(self._buf[:8]).partition(b" ")
            if not space and len(self._buf) < 8:
                return  # not enough to see the method yet
            if method == b"GET" or not space:  # websockets handles (or refuses) the rest
                self._mode = "ws"
                self._sniffed.set()
                if self._timer is not None:
                    self._timer.cancel()
                assert self._front is not None
                super().connection_made(self._front)
                super().data_received(bytes(self._buf))
                self._buf.clear()
                return
            self._mode = "http"
            self._sniffed.set()
        if self._task is None:
            self._read_http()

    def _read_http(self) -> None:
        end = self._buf.find(b"\r\n\r\n")
        if end < 0:
            if len(self._buf) > MAX_HEAD:
                self._answer(HttpReply(431, b"request headers too large\n"))
            return
        lines = bytes(self._buf[:end]).decode("latin-1").split("\r\n")
        method, _, rest = lines[0].partition(" ")
        target = rest.rpartition(" ")[0] or rest
        headers = Headers()
        for line in lines[1:]:
            name, colon, value = line.partition(":")
            if colon:
                headers[name.strip()] = value.strip()
        try:
            length = int(headers.get("Content-Length", "0"))
        except ValueError:
            self._answer(HttpReply(400, b"bad Content-Length\n"))
            return
        if length > self._max_body or length < 0:
            self._answer(HttpReply(413, f"body over {self._max_body} bytes\n".encode()))
            return
        if len(self._buf) < end + 4 + length:
            return  # wait for the rest of the body
        body = bytes(self._buf[end + 4 : end + 4 + length])
        assert self._front is not None
        local = self._front.get_extra_info("sockname")[:2]
        remote = self._front.get_extra_info("peername")[:2]
        path, _, query = target.partition("?")
        secure = self._front.get_extra_info("ssl_object") is not None
        request = HttpRequest(method, path, headers, body, local, remote, query, secure)
        self._task = asyncio.get_running_loop().create_task(self._serve(request))

    async def _serve(self, request: HttpRequest) -> None:
        try:
            reply = await self._handler(request)
        except Exception:  # boundary: one bad request must not take the server down
            log.exception("http %s: %s %s failed", self._peer(), request.method, request.path)
            reply = HttpReply(500, b"internal error\n")
        self._answer(reply)

    def _answer(self, reply: HttpReply) -> None:
        if self._timer is not None:
            self._timer.cancel()
        if self._front is not None and not self._front.is_closing():
            self._front.write(reply.encode())
            self._front.close()

    def eof_received(self) -> bool | None:
        if self._mode == "ws":
            return super().eof_received()
        return None  # close the transport

    def connection_lost(self, exc: Exception | None) -> None:
        if self._mode == "ws":
            super().connection_lost(exc)
            return
        if self._timer is not None:
            self._timer.cancel()
        if self._task is not None and not self._task.done():
            self._task.cancel()  # awaited by `handshake`
        self._sniffed.set()  # (still "sniff" when the peer left before its first bytes)
        self._gone.set()
