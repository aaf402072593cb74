"""The gateway as the MCP client of a xiaozhi box's own tools, over its `mcp` messages.

The firmware (main/mcp_server.cc) is an MCP server inside `{"type":"mcp","payload":JSON-RPC}`
messages when its hello has `features.mcp: true`: `initialize` (protocolVersion 2024-11-05),
`tools/list` (pages of at most ~8 kB, `nextCursor` names the first tool of the next page, sent
back as `cursor`), `tools/call {name, arguments}` answered with `{content: [{type: text, text}],
isError}` or `{error: {message}}`. Ids are integers. This is JSON-RPC by hand: the `mcp` SDK is
for the gateway's own server and external servers (gateway/brain/mcp_client.py), not for a box.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from gateway import __version__
from gateway.devices.device_tools import DeviceTool, DeviceToolError

log = logging.getLogger(__name__)

PROTOCOL_VERSION = "2024-11-05"
MAX_PAGES = 32  # a box lists a few dozen tools at most; more pages is a loop


class BoxMcp:
    def __init__(self, peer: str, send: Callable[[dict[str, Any]], Awaitable[None]], timeout_s: float) -> None:
        self.peer = peer
        self._send = send  # sends one JSON-RPC payload inside an `mcp` message
        self._timeout_s = timeout_s
        self._next_id = 1
        self._waiting: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._tools: list[DeviceTool] = []
        self.server_info: dict[str, Any] = {}

    def listed(self) -> list[DeviceTool]:
        return list(self._tools)

    async def start(self) -> list[DeviceTool]:
        """initialize, then every page of tools/list; raises DeviceToolError."""
        result = await self._request("initialize", {"protocolVersion": PROTOCOL_VERSION, "capabilities": {},
                                                    "clientInfo": {"name": "edge-voice-gateway", "version": __version__}})
        self.server_info = result.get("serverInfo") if isinstance(result.get("serverInfo"), dict) else {}
        await self._send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        tools: list[DeviceTool] = []
        cursor, seen = "", set()
        for _ in range(MAX_PAGES):
            page = await self._request("tools/list", {"cursor": cursor} if cursor else {})
            tools.extend(_tools(page, self.peer))
            cursor = page.get("nextCursor") or ""
            if not isinstance(cursor, str) or not cursor:
                break
            if cursor in seen:
                raise DeviceToolError("device-tool-error", f"tools/list repeats the cursor {cursor!r}")
            seen.add(cursor)
        else:
            raise DeviceToolError("device-tool-error", f"tools/list has more than {MAX_PAGES} pages")
        self._tools = tools
        return self.listed()

    async def call(self, name: str, arguments: dict[str, Any], timeout_s: float | None = None) -> str:
        return await (await self.send_call(name, arguments, timeout_s))

    async def send_call(self, name: str, arguments: dict[str, Any], timeout_s: float | None = None) -> Awaitable[str]:
        """Send the tools/call now; the awaitable returned waits for its result (an Action's tool
        goes out before the sentence's audio, its answer is not waited for there)."""
        waiting = await self._send_request("tools/call", {"name": name, "arguments": arguments}, timeout_s)

        async def result() -> str:
            return _call_result(name, await waiting)

        return result()

    async def _request(self, method: str, params: dict[str, Any], timeout_s: float | None = None) -> dict[str, Any]:
        return await (await self._send_request(method, params, timeout_s))

    async def _send_request(self, method: str, params: dict[str, Any], timeout_s: float | None) -> Awaitable[dict[str, Any]]:
        rid, self._next_id = self._next_id, self._next_id + 1
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiting[rid] = future
        try:
            await self._send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        except BaseException:
            self._waiting.pop(rid, None)
            raise
        return self._wait(rid, future, method, self._timeout_s if timeout_s is None else timeout_s)

    async def _wait(self, rid: int, future: asyncio.Future[dict[str, Any]], method: str, timeout: float) -> dict[str, Any]:
        try:
            async with asyncio.timeout(timeout):
                return await future
        except TimeoutError:
            raise DeviceToolError("device-tool-timeout", f"the device did not answer {method} within {timeout:g} s") from None
        finally:
            self._waiting.pop(rid, None)

    def on_payload(self, payload: Any) -> None:
        """A JSON-RPC message from the box (a reply to one of ours; it sends no requests of its own)."""
        if not isinstance(payload, dict):
            log.warning("%s: mcp payload ignored: not a JSON object", self.peer)
            return
        rid = payload.get("id")
        future = self._waiting.get(rid) if isinstance(rid, int) else None
        if future is None or future.done():
            log.info("%s: mcp message ignored (no request of ours with id %r; method %r)", self.peer, rid, payload.get("method"))
            return
        error = payload.get("error")
        if error is not None:
            message = error.get("message") if isinstance(error, dict) else error
            future.set_exception(DeviceToolError("device-tool-error", str(message or "error without a message")))
        elif isinstance(payload.get("result"), dict):
            future.set_result(payload["result"])
        else:
            future.set_exception(DeviceToolError("device-tool-error", "reply without a result object"))

    def close(self) -> None:
        """The box is gone: the calls still waiting fail at once."""
        for future in self._waiting.values():
            if not future.done():
                future.set_exception(DeviceToolError("device-gone", "the device disconnected before it answered"))
        self._waiting.clear()


def _tools(page: dict[str, Any], peer: str) -> list[DeviceTool]:
    listed = page.get("tools")
    if not isinstance(listed, list):
        raise DeviceToolError("device-tool-error", "tools/list result has no tools list")
    tools = []
    for item in listed:
        if not isinstance(item, dict) or not isinstance(item.get("name"), str) or not item["name"]:
            log.warning("%s: a tool without a name skipped in tools/list", peer)
            continue
        schema = item.get("inputSchema") if isinstance(item.get("inputSchema"), dict) else {"type": "object", "properties": {}}
        tools.append(DeviceTool(item["name"], str(item.get("description") or item["name"]), schema))
    return tools


def _call_result(name: str, result: dict[str, Any]) -> str:
    """A tools/call result's text (`content` parts joined); `isError: true` raises."""
    content = result.get("content")
    parts = content if isinstance(content, list) else []
    text = "\n".join(str(p.get("text", "")) if p.get("type") == "text" else f"[{p.get('type', '?')}]"
                     for p in parts if isinstance(p, dict))
    if result.get("isError") is True:
        raise DeviceToolError("device-tool-error", f"{name}: {text or 'the device reported an error'}")
    return text or "done"
