"""Tools from external MCP servers (gateway.yaml `brain.mcp_servers`) for the LLM, over stdio,
streamable HTTP or SSE, with the official SDK client.

One long-lived task per server holds the transport and the `ClientSession` (anyio cancel scopes
are entered and left in that task); tool calls from the brain use the session from their own
task. A server's tools are listed after `initialize` (again when it sends `tools/list_changed`)
and offered as `<server>__<tool>`. When a
server is missing or dies its tools answer the model with a clear error, the failure is logged
once with the server's name and reason, and the task reconnects with back-off.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx
from mcp import ClientSession, McpError, StdioServerParameters
from mcp.client.sse import sse_client
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.types import CONNECTION_CLOSED, CallToolResult, ServerNotification, TextContent, ToolListChangedNotification

from gateway.brain.tools import Tool
from gateway.config import McpServerConfig

log = logging.getLogger(__name__)
BACKOFF_S = (1.0, 2.0, 5.0, 10.0, 30.0, 60.0)  # between reconnection attempts; the last repeats
STABLE_S = 60.0  # a connection up this long ends an outage: its loss is logged again, back-off restarts
CONNECT_TIMEOUT_S = 30.0  # initialize + list_tools at least this long (`npx`/`uvx` servers start slowly)
MAX_NAME = 64  # OpenAI function names: [A-Za-z0-9_-]{1,64}


class ServerGone(Exception):
    """The server closed the connection (a stdio server exited, an HTTP stream ended)."""


class McpServerTools:
    """One external MCP server: its connection task and its tools for the LLM."""

    def __init__(self, cfg: McpServerConfig, backoff_s: Sequence[float] = BACKOFF_S) -> None:
        self.cfg = cfg
        self.name = cfg.name
        self.connected = asyncio.Event()  # set while a session with listed tools is up
        self.attempt_failed = asyncio.Event()  # set after each failed or ended connection (tests clear it)
        self.tools_changed = asyncio.Event()  # set after a re-listing on the server's list_changed (tests clear it)
        self._backoff = tuple(backoff_s)
        self._session: ClientSession | None = None
        self._tools: list[Tool] = []  # kept after a disconnect: calls then say the server is down
        self._reason = "not connected yet"
        self._up_since = 0.0
        self._calls: set[anyio.CancelScope] = set()  # in flight: cancelled when the server is gone

    def tools(self) -> list[Tool]:
        return list(self._tools)

    def unavailable(self) -> str:
        return f"MCP server {self.name!r} is not connected ({self._reason}); try again later or do without it"

    async def run(self) -> None:
        """Connect, serve, reconnect with back-off; until cancelled. Never raises otherwise."""
        failures = 0
        while True:
            try:
                await self._connect_once()
            except Exception as exc:  # noqa: BLE001 - any failure of a server only affects its tools
                self._reason = _reason(exc)
                if _cancel_swallowed():
                    raise asyncio.CancelledError from exc
            finally:
                was_up, self._session = self.connected.is_set(), None
                self.connected.clear()
                for scope in self._calls:  # their answers will never come
                    scope.cancel()
            if was_up and time.monotonic() - self._up_since >= STABLE_S:
                failures = 0  # a server that keeps dying right after connecting backs off further
            delay = self._backoff[min(failures, len(self._backoff) - 1)]
            if was_up or failures == 0:  # logged once per outage; the retries only at debug level
                log.warning("mcp client %s: %s; reconnecting with back-off", self.name, self._reason)
            else:
                log.debug("mcp client %s: still down (%s); next try in %g s", self.name, self._reason, delay)
            failures += 1
            self.attempt_failed.set()
            await asyncio.sleep(delay)  # the back-off between attempts; cancellation ends it

    async def _connect_once(self) -> None:
        async with self._transport() as (read, write):
            inbound, session_read = anyio.create_memory_object_stream[Any](0)
            relist, relist_wanted = anyio.create_memory_object_stream[None](1)

            async def on_message(message: Any) -> None:  # in the session's receive loop: must not wait
                if isinstance(message, ServerNotification) and isinstance(message.root, ToolListChangedNotification):
                    with contextlib.suppress(anyio.WouldBlock):
                        relist.send_nowait(None)

            async with (ClientSession(session_read, write, message_handler=on_message) as session,
                        anyio.create_task_group() as tg):
                tg.start_soon(self._serve, session, relist_wanted)
                await _relay(read, inbound)  # returns when the server is gone
                tg.cancel_scope.cancel()
        raise ServerGone("the server closed the connection")

    async def _serve(self, session: ClientSession, relist_wanted: Any) -> None:
        with anyio.fail_after(max(self.cfg.timeout_s, CONNECT_TIMEOUT_S)):
            await session.initialize()
            listed = (await session.list_tools()).tools
        self._tools = self._make_tools(listed)
        self._session, self._up_since = session, time.monotonic()
        self.connected.set()
        log.info("mcp client %s: connected, tools: %s", self.name, ", ".join(t.name for t in self._tools) or "none")
        async for _ in relist_wanted:  # the server says its tools changed
            with anyio.fail_after(max(self.cfg.timeout_s, CONNECT_TIMEOUT_S)):
                self._tools = self._make_tools((await session.list_tools()).tools)
            self.tools_changed.set()
            log.info("mcp client %s: tools now: %s", self.name, ", ".join(t.name for t in self._tools) or "none")

    @asynccontextmanager
    async def _transport(self) -> AsyncIterator[tuple[Any, Any]]:
        cfg = self.cfg
        if cfg.command:
            params = StdioServerParameters(command=cfg.command[0], args=list(cfg.command[1:]), env=dict(cfg.env) or None)
            async with stdio_client(params) as (read, write):  # the server's stderr goes to ours
                yield read, write
            return
        if cfg.transport == "sse":
            async with sse_client(cfg.url, headers=dict(cfg.headers), timeout=cfg.timeout_s) as (read, write):
                yield read, write
            return
        timeout = httpx.Timeout(cfg.timeout_s, read=max(cfg.timeout_s, 300.0))
        async with create_mcp_http_client(headers=dict(cfg.headers), timeout=timeout) as http:
            async with streamable_http_client(cfg.url, http_client=http) as (read, write, _session_id):
                yield read, write

    def _make_tools(self, listed: list[Any]) -> list[Tool]:
        wanted = set(self.cfg.tools)
        tools: dict[str, Tool] = {}
        for t in listed:
            if wanted and t.name not in wanted:
                continue
            exposed = re.sub(r"[^A-Za-z0-9_-]", "_", f"{self.name}__{t.name}")[:MAX_NAME]
            if exposed in tools:
                log.warning("mcp client %s: tool %r skipped: its name %r is taken", self.name, t.name, exposed)
                continue
            tools[exposed] = Tool(exposed, t.description or t.title or t.name,
                                  t.inputSchema or {"type": "object", "properties": {}}, self._caller(t.name))
        if missing := wanted - {t.name for t in listed}:  # a typo in gateway.yaml
            log.warning("mcp client %s: brain.mcp_servers tools not offered by the server: %s",
                        self.name, ", ".join(sorted(missing)))
        return list(tools.values())

    def _caller(self, tool: str) -> Callable[[dict[str, Any], str], Awaitable[str]]:
        async def run(args: dict[str, Any], device_id: str) -> str:
            return await self.call(tool, args)

        return run

    async def call(self, tool: str, args: dict[str, Any]) -> str:
        """The tool's text result, or an `error: ...` text for the model (never raises for the server's faults)."""
        session = self._session
        if session is None:
            return f"error: {self.unavailable()}"
        timeout = self.cfg.timeout_s
        try:
            with anyio.move_on_after(timeout) as scope:
                self._calls.add(scope)
                try:
                    result = await session.call_tool(tool, args)
                finally:
                    self._calls.discard(scope)
        except McpError as exc:
            if exc.error.code == CONNECTION_CLOSED:
                return f"error: MCP server {self.name!r} lost the connection during {tool}; try again later"
            return f"error: {exc.error.message}"
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            return f"error: MCP server {self.name!r} lost the connection; try again later"
        if scope.cancelled_caught and self._session is not session:
            return f"error: MCP server {self.name!r} lost the connection during {tool}; try again later"
        if scope.cancelled_caught:
            return f"error: MCP server {self.name!r} did not answer {tool} within {timeout:g} s"
        return result_text(result)


class McpClients:
    """Every configured server: a `ToolSource` for the brain's Toolbox, and `run()` for their tasks."""

    def __init__(self, servers: Sequence[McpServerConfig], backoff_s: Sequence[float] = BACKOFF_S) -> None:
        self.servers = {s.name: McpServerTools(s, backoff_s) for s in servers}

    def tools(self) -> list[Tool]:
        return [t for s in self.servers.values() for t in s.tools()]

    def why_missing(self, name: str) -> str | None:
        server = self.servers.get(name.split("__", 1)[0]) if "__" in name else None
        if server is None:
            return None
        if server.connected.is_set():
            return f"MCP server {server.name!r} has no tool {name!r}; it offers: " + (
                ", ".join(t.name for t in server.tools()) or "nothing")
        return server.unavailable()

    async def run(self) -> None:
        """Keep every server connected until cancelled (started by Gateway.serve)."""
        async with asyncio.TaskGroup() as tg:
            for server in self.servers.values():
                tg.create_task(server.run(), name=f"mcp-client-{server.name}")


async def probe(cfg: McpServerConfig) -> tuple[list[str], str | None]:
    """Connect once (for `gateway doctor`): (the tool names the LLM would see, None) or ([], why not)."""
    server = McpServerTools(cfg, backoff_s=(CONNECT_TIMEOUT_S,))
    tasks = [asyncio.create_task(server.run()), asyncio.create_task(server.connected.wait()),
             asyncio.create_task(server.attempt_failed.wait())]
    try:  # bounded: an attempt ends after max(timeout_s, CONNECT_TIMEOUT_S) at the latest
        await asyncio.wait(tasks[1:], return_when=asyncio.FIRST_COMPLETED)
        connected = server.connected.is_set()
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return ([t.name for t in server.tools()], None) if connected else ([], server._reason)


async def _relay(source: Any, sink: Any) -> None:
    """Forward the transport's messages to the session; return when the server is gone."""
    async with sink:
        async for message in source:
            if isinstance(message, Exception):
                log.debug("mcp client: transport error: %s", message)
            await sink.send(message)


def result_text(result: CallToolResult) -> str:
    parts = [c.text if isinstance(c, TextContent) else f"[{c.type} content]" for c in result.content]
    text = "\n".join(parts)
    if not text and result.structuredContent is not None:
        text = json.dumps(result.structuredContent, ensure_ascii=False)
    if result.isError:
        return f"error: {text or 'the tool failed without a message'}"
    return text or "(the tool returned nothing)"


def _cancel_swallowed() -> bool:
    """This task was asked to stop, but the cancellation did not reach us: the SDK's anyio task
    groups raise a transport's error (a 401, a closed stream) that coincides with our cancellation
    as an exception group without the CancelledError. Retrying would then loop forever and hold
    the gateway's shutdown; the task's pending cancel count still says it was asked."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def _reason(exc: BaseException) -> str:
    """The innermost real cause of a failure (anyio wraps them in exception groups)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, ServerGone):
        return str(exc)
    if isinstance(exc, TimeoutError):
        return "no answer to initialize / list_tools in time"
    if isinstance(exc, McpError):
        return f"MCP error: {exc.error.message}"
    return f"{type(exc).__name__}: {exc}"
