"""A tiny OpenAI-compatible chat server on 127.0.0.1: streams scripted SSE chunks.

Used by the tests and by `gateway bench` to measure the gateway without a network or a real model.

Each request pops the next `Script` (or repeats the last): tokens with an optional delay between
them, or a failure mode: HTTP 500, a stall before the first token, garbage instead of JSON, a
stall after the first token, or the connection dropped after it. Streams use chunked transfer
encoding like real servers, so a connection closed mid-reply is an error for the client.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field


@dataclass
class Script:
    tokens: list[str] = field(default_factory=list)
    mode: str = "ok"  # ok | fail | stall | garbage | stall_after_first | cut_after_first
    delay_s: float = 0.0  # between tokens
    first_delay_s: float = 0.0  # before the first token (the model's own first-token latency)
    tool_calls: list[tuple[str, str]] = field(default_factory=list)  # (name, JSON arguments) after the tokens


HANGUP_GRACE_S = 0.05


class ScriptedLlm:
    def __init__(self, scripts: list[Script]) -> None:
        self.scripts = list(scripts)
        self.requests: list[dict] = []
        self.abandoned: list[int] = []  # indexes of requests whose client hung up before the reply ended
        self.served = asyncio.Event()
        self._received = asyncio.Condition()
        self._server: asyncio.Server | None = None
        self._release = asyncio.Event()  # stalls end when the test closes the server

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}/v1"

    async def __aenter__(self) -> ScriptedLlm:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._release.set()
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()

    async def wait_requests(self, count: int) -> None:
        """Until `count` requests have arrived (bound it with asyncio.wait_for)."""
        async with self._received:
            await self._received.wait_for(lambda: len(self.requests) >= count)

    async def wait_abandoned(self, count: int) -> None:
        """Until the clients of `count` requests have hung up mid-reply (bound it with asyncio.wait_for)."""
        async with self._received:
            await self._received.wait_for(lambda: len(self.abandoned) >= count)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.decode("latin-1").split("\r\n"):
                if line.lower().startswith("content-length:"):
                    length = int(line.split(":", 1)[1])
            self.requests.append(json.loads(await reader.readexactly(length)))
            async with self._received:
                self._received.notify_all()
            script = self.scripts.pop(0) if len(self.scripts) > 1 else self.scripts[0]
            await self._respond_until_hangup(len(self.requests) - 1, script, reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:  # the test (and its loop) ended mid-reply; Python 3.11's
            pass  # start_server would log a cancelled handler as an unhandled error
        finally:
            self.served.set()
            writer.close()

    async def _respond_until_hangup(self, index: int, script: Script, reader: asyncio.StreamReader,
                                    writer: asyncio.StreamWriter) -> None:
        """Respond; if the client closes the connection first (a cancelled request), note it and stop."""
        respond = asyncio.create_task(self._respond(script, writer))
        hangup = asyncio.create_task(reader.read(1))  # b"" at the client's end of stream
        try:
            await asyncio.wait({respond, hangup}, return_when=asyncio.FIRST_COMPLETED)
            if not respond.done():  # a reply that was only flushing its last bytes is not abandoned
                await asyncio.wait({respond}, timeout=HANGUP_GRACE_S)
            if not respond.done():
                self.abandoned.append(index)
                async with self._received:
                    self._received.notify_all()
        finally:  # both owned: ended here, also when this handler is cancelled
            hangup.cancel()
            respond.cancel()
            _, outcome = await asyncio.gather(hangup, respond, return_exceptions=True)
        if isinstance(outcome, Exception):
            raise outcome  # a failed write

    async def _respond(self, script: Script, writer: asyncio.StreamWriter) -> None:
        if script.mode == "fail":
            body = b'{"error": {"message": "scripted failure", "type": "server_error"}}'
            writer.write(b"HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\n"
                         b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(body), body))
            await writer.drain()
            return
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
                     b"Connection: close\r\n\r\n")
        await writer.drain()
        if script.mode == "stall":
            await self._release.wait()
            return
        if script.mode == "garbage":
            writer.write(_http_chunk(b"data: this is not json\n\n") + _LAST_CHUNK)
            await writer.drain()
            return
        if script.first_delay_s:
            await asyncio.sleep(script.first_delay_s)  # the scripted model's latency, not a wait in a test
        for i, token in enumerate(script.tokens):
            writer.write(_http_chunk(b"data: " + json.dumps(_chunk(token)).encode() + b"\n\n"))
            await writer.drain()
            if script.mode == "stall_after_first":
                await self._release.wait()
                return
            if script.mode == "cut_after_first":
                return  # the connection closes without the last chunk: the client sees a broken stream
            if script.delay_s and i + 1 < len(script.tokens):
                await asyncio.sleep(script.delay_s)  # the scripted model's own pace, not a wait in a test
        for i, (name, arguments) in enumerate(script.tool_calls):  # arguments split over two chunks
            half = len(arguments) // 2
            for part in ({"index": i, "id": f"call_{i}", "type": "function",
                          "function": {"name": name, "arguments": arguments[:half]}},
                         {"index": i, "function": {"arguments": arguments[half:]}}):
                writer.write(_http_chunk(b"data: " + json.dumps(_chunk(None, [part])).encode() + b"\n\n"))
        writer.write(_http_chunk(b"data: [DONE]\n\n") + _LAST_CHUNK)
        await writer.drain()


_LAST_CHUNK = b"0\r\n\r\n"


def _http_chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def _chunk(token: str | None, tool_calls: list[dict] | None = None) -> dict:
    delta: dict = {"role": "assistant", "content": token}
    if tool_calls:
        delta["tool_calls"] = tool_calls
    return {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 0, "model": "scripted",
            "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
