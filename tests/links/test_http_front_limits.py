"""Plain HTTP requests other than GET (gateway/links/http_front.py) hold at most the request while
it is answered, and a request that repeats a field that must come once is answered 400 with one
log line, not a traceback. The screen server (gateway/links/web.py) with a mount whose answer the
test holds back, on a free loopback port; the peer is a raw TCP client, as an attacker's is."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from gateway.links.http_front import HttpReply, HttpRequest
from gateway.links.web import TextSocket, WebServer

JUNK_BYTES = 64 * 1024 * 1024  # far more than the socket buffers between the two ends hold
STUCK_S = 5.0  # the junk must still be stuck after this long (without the limit it takes well under a second)


class HeldMount:
    """Answers under /console once `release` is set; remembers what it was asked."""

    prefix = "/console"

    def __init__(self) -> None:
        self.asked: list[HttpRequest] = []
        self.entered = asyncio.Event()
        self.release = asyncio.Event()

    async def http(self, request: HttpRequest) -> HttpReply:
        self.asked.append(request)
        self.entered.set()
        await self.release.wait()
        return HttpReply(200, b"answered\n")

    async def upgrade(self, request: HttpRequest) -> HttpReply | None:
        return HttpReply(404, b"")

    async def socket(self, sock: TextSocket) -> None:
        pass


@asynccontextmanager
async def serving(mount: HeldMount) -> AsyncIterator[int]:
    async def no_screen(sock: TextSocket) -> None:
        pass

    server = WebServer("127.0.0.1", 0, "/screen", lambda path, query, peer: None, no_screen)
    ready = asyncio.Event()
    task = asyncio.create_task(server.serve(None, ready, mount))
    try:
        await asyncio.wait_for(ready.wait(), 30)
        yield server.port
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def _ask(port: int, raw: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(raw)
    await writer.drain()
    answer = await asyncio.wait_for(reader.read(), 30)
    writer.close()
    return answer


def _post(path: str, body: bytes, *more: str) -> bytes:
    head = [f"POST {path} HTTP/1.1", "Host: 127.0.0.1", f"Content-Length: {len(body)}", *more]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


async def test_what_a_peer_sends_after_its_request_is_not_read_until_the_answer() -> None:
    mount = HeldMount()
    async with serving(mount) as port:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(_post("/console/api/login", b'{"password": "x"}'))

        async def junk() -> None:
            chunk = b"A" * (1 << 20)
            for _ in range(JUNK_BYTES // len(chunk)):
                writer.write(chunk)
                await writer.drain()

        sending = asyncio.create_task(junk())
        await asyncio.wait_for(mount.entered.wait(), 30)
        done, _ = await asyncio.wait([sending], timeout=STUCK_S)
        assert not done, "the gateway read 64 MB the peer sent after its request"
        assert [r.body for r in mount.asked] == [b'{"password": "x"}']
        mount.release.set()  # answered and closed: the peer's writes end
        await asyncio.gather(sending, return_exceptions=True)
        writer.close()
        # and it goes on serving
        assert (await _ask(port, _post("/console/api/login", b"{}"))).startswith(b"HTTP/1.1 200 ")


@pytest.mark.parametrize("raw, field", [
    (_post("/console/api/login", b"{}", "Content-Length: 2"), "content-length"),
    (_post("/console/api/login", b"{}", "Cookie: a=1", "Cookie: b=2"), "cookie"),
    (b"GET /console/ HTTP/1.1\r\nHost: 127.0.0.1\r\nCookie: a=1\r\nCookie: b=2\r\n\r\n", "cookie"),
    (b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nHost: example.org\r\n\r\n", "host"),
])
async def test_a_field_given_twice_is_a_400_with_one_log_line(raw: bytes, field: str,
                                                              caplog: pytest.LogCaptureFixture) -> None:
    mount = HeldMount()
    mount.release.set()
    with caplog.at_level(logging.INFO):
        async with serving(mount) as port:
            answer = await _ask(port, raw)
    assert answer.startswith(b"HTTP/1.1 400 ") and field.encode() in answer.lower()
    assert mount.asked == []
    lines = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(lines) == 1 and lines[0].exc_info is None, [r.getMessage() for r in lines]
    assert lines[0].getMessage().startswith("http 127.0.0.1:") and f"header {field} given more than once" in lines[0].getMessage()


async def test_a_list_field_on_several_lines_is_served() -> None:
    mount = HeldMount()
    mount.release.set()
    async with serving(mount) as port:
        answer = await _ask(port, _post("/console/api/login", b"{}", "Accept: text/plain", "Accept: */*"))
    assert answer.startswith(b"HTTP/1.1 200 ")


@pytest.mark.parametrize("raw, status", [
    (b"POST /console/api/login HTTP/1.1\r\n" + b"X-Pad: " + b"a" * 20000 + b"\r\n\r\n", b"431"),
    (_post("/console/api/login", b"", "Content-Length: 99999999"), b"400"),  # (the first is 0: repeated)
    (b"POST /console/api/login HTTP/1.1\r\nContent-Length: 9999999\r\n\r\n", b"413"),
    (b"POST /console/api/login HTTP/1.1\r\nContent-Length: 1_0\r\n\r\n0123456789", b"400"),
    (b"POST /console/api/login HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", b"411"),
])
async def test_an_oversized_or_malformed_request_is_refused_before_the_handler(raw: bytes, status: bytes) -> None:
    mount = HeldMount()
    mount.release.set()
    async with serving(mount) as port:
        answer = await _ask(port, raw)
    assert answer.startswith(b"HTTP/1.1 " + status + b" ") and mount.asked == []
