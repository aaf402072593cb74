"""Plain HTTP requests other than GET on the WebSocket port (the xiaozhi boxes POST their OTA check).

websockets answers only GET (upgrades, and `process_request` for plain GETs) and refuses any
other method before a hook could see it. `HttpFrontConnection` is the websockets connection with
a look at the request line first: a GET goes on to websockets unchanged; another method (POST)
is read here (headers, a body of at most `max_body` bytes) and answered by `handler`, then the
connection is closed. A connection whose request is not complete and answered within `timeout` s
(from when it connected) is closed, with a log line saying which of the two it lacked.
Once the request is complete nothing more is read from the peer until it is answered (TCP flow
control holds it back): at most the head (`MAX_HEAD`) and the body (`max_body`) are held, however
much it sends. A malformed request line, an over-long head or body, or a field given twice that
must be given once (two Content-Length, two Cookie: `repeated_field`) is answered 400, 413 or 431
with one log line naming the peer.
The task that answers is owned by the websockets server's handler of the connection: its
`handshake` waits, in HTTP mode, until the connection is gone, and cancels and awaits that task.
Relies on websockets 15's asyncio `ServerConnection` being an asyncio Protocol (pinned <16).
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from http import HTTPStatus
from typing import TYPE_CHECKING, Protocol

from websockets.asyncio.server import Request, Response, ServerConnection
from websockets.datastructures import Headers

from gateway.log_safe import log_safe

if TYPE_CHECKING:
    from gateway.links.web import TextSocket

log = logging.getLogger(__name__)

MAX_HEAD = 16384
REQUEST_LINE = re.compile(r"([A-Z]{1,16}) ([!-~]+) HTTP/1\.[01]")  # method, target (visible ASCII), version
# Fields that may come as several lines (lists, RFC 9110 5.3); any other one given twice is refused.
LIST_FIELDS = frozenset({"accept", "accept-charset", "accept-encoding", "accept-language", "cache-control",
                         "connection", "forwarded", "pragma", "sec-websocket-extensions", "sec-websocket-protocol",
                         "te", "trailer", "via", "warning", "x-forwarded-for"})


def repeated_field(headers: Headers) -> str | None:
    """The name of a field given more than once that must be given once (Host, Content-Length,
    Cookie, Origin, ...), or None. Such a request is refused 400: which of the values would count?"""
    return next((name for name in headers if name not in LIST_FIELDS and len(headers.get_all(name)) > 1), None)


def refuse_repeated_field(conn: ServerConnection, request: Request) -> Response | None:
    """For websockets' `process_request` (the GETs): a request with a `repeated_field` answered 400
    with one log line naming the peer; None for any other."""
    if (repeated := repeated_field(request.headers)) is None:
        return None
    log.warning("http %s:%s: refused (400): GET %s: header %s given more than once", *conn.remote_address[:2],
                log_safe(request.path), log_safe(repeated))
    return conn.respond(HTTPStatus.BAD_REQUEST, f"the header {log_safe(repeated)} is given more than once\n")


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
        self._complete = False  # the request was read whole (or refused): nothing more is read
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
            what = "not answered" if self._complete else "no complete request"  # (its handler took that long)
            log.warning("http %s: %s within %.0f s; closed", self._peer(), what, self._timeout)
            self._front.close()

    def _peer(self) -> str:
        assert self._front is not None
        address = self._front.get_extra_info("peername") or ("?", 0)
        return f"{address[0]}:{address[1]}"

    def data_received(self, data: bytes) -> None:
        if self._mode == "ws":
            super().data_received(data)
            return
        if self._complete:  # (reading is paused; a last chunk may still come in): not kept
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
        self._read_http()

    def _read_http(self) -> None:
        end = self._buf.find(b"\r\n\r\n", 0, MAX_HEAD + 4)
        if end < 0:
            if len(self._buf) > MAX_HEAD:
                self._refuse(431, "request headers too large", f"a head over {MAX_HEAD} bytes")
            return
        lines = bytes(self._buf[:end]).decode("latin-1").split("\r\n")
        if (line := REQUEST_LINE.fullmatch(lines[0])) is None:
            self._refuse(400, "bad request line", f"bad request line {log_safe(lines[0])}")
            return
        method, target = line.group(1), line.group(2)
        headers = Headers()
        for field in lines[1:]:
            name, colon, value = field.partition(":")
            if colon:
                headers[name.strip()] = value.strip()
        if (repeated := repeated_field(headers)) is not None:
            self._refuse(400, f"the header {log_safe(repeated)} is given more than once",
                         f"{method} {log_safe(target)}: header {log_safe(repeated)} given more than once")
            return
        if "Transfer-Encoding" in headers:  # a chunked body would be taken for the next request
            self._refuse(411, "send the body with Content-Length (Transfer-Encoding is not supported)",
                         f"{method} {log_safe(target)}: Transfer-Encoding {log_safe(headers['Transfer-Encoding'])}")
            return
        if not re.fullmatch(r"[0-9]{1,12}", given := headers.get("Content-Length", "0")):
            self._refuse(400, "bad Content-Length", f"{method} {log_safe(target)}: bad Content-Length {log_safe(given)}")
            return
        if (length := int(given)) > self._max_body:
            self._refuse(413, f"body over {self._max_body} bytes", f"{method} {log_safe(target)}: a body of {length} bytes")
            return
        if len(self._buf) < end + 4 + length:
            return  # wait for the rest of the body
        body = bytes(self._buf[end + 4 : end + 4 + length])
        self._stop_reading()
        assert self._front is not None
        local = self._front.get_extra_info("sockname")[:2]
        remote = self._front.get_extra_info("peername")[:2]
        path, _, query = target.partition("?")
        secure = self._front.get_extra_info("ssl_object") is not None
        request = HttpRequest(method, path, headers, body, local, remote, query, secure)
        self._task = asyncio.get_running_loop().create_task(self._serve(request))

    def _stop_reading(self) -> None:
        """The request is complete (or refused): what else the peer sends stays in the kernel, held
        back by TCP flow control, until the answer goes and the connection closes."""
        self._complete = True
        self._buf = bytearray()
        if self._front is not None and not self._front.is_closing():
            self._front.pause_reading()

    def _refuse(self, status: int, text: str, why: str) -> None:
        log.warning("http %s: refused (%d): %s", self._peer(), status, why)
        self._stop_reading()
        self._answer(HttpReply(status, f"{text}\n".encode()))

    async def _serve(self, request: HttpRequest) -> None:
        try:
            reply = await self._handler(request)
        except Exception:  # boundary: one bad request must not take the server down
            log.exception("http %s: %s %s failed", self._peer(), request.method, log_safe(request.path))
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
