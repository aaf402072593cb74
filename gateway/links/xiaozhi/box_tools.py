"""A connected xiaozhi box's own tools: listed after its hello, offered to the gateway, called by
Action codes. Owned by the box's XiaozhiConnection, which starts it once the session is welcomed
and closes it when the box goes (every task it starts is cancelled and awaited then).

`start(device_id)` runs initialize + tools/list in a task and attaches the box's tools to the
gateway's `DeviceTools` (the brain, the MCP server); `on_action(code)` calls the tool the
`DeviceActions` table names for that code: the request goes out at once (before the sentence's
audio), its answer is awaited in a task so the audio never waits for the box's servo; a failure
is logged with the box and the reason, nothing else happens.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any

from gateway.devices.device_actions import DeviceActions
from gateway.devices.device_tools import DeviceToolError, DeviceTools
from gateway.links.xiaozhi.box_mcp import BoxMcp

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ToolServices:
    """What the xiaozhi endpoint hands each box's connection for its tools."""

    registry: DeviceTools
    actions: DeviceActions


class BoxTools:
    def __init__(self, mcp: BoxMcp, services: ToolServices) -> None:
        self.mcp = mcp
        self._services = services
        self._device_id = ""
        self._tasks: set[asyncio.Task[None]] = set()
        self.ready = asyncio.Event()  # set once the tools are listed and attached

    def _spawn(self, coro: Any, name: str) -> None:
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def start(self, device_id: str) -> None:
        self._device_id = device_id
        self._spawn(self._list(), f"mcp-list {self.mcp.peer}")

    async def _list(self) -> None:
        try:
            await self.mcp.start()
        except DeviceToolError as exc:
            log.warning("%s: %s: the box's MCP tools could not be listed: %s", self.mcp.peer, exc.code, exc.text)
            return
        self._services.registry.attach(self._device_id, self.mcp)
        self.ready.set()

    async def on_action(self, code: str) -> None:
        call = self._services.actions.for_code(code)
        if call is None or not self.ready.is_set():
            return
        if not any(t.name == call.tool for t in self.mcp.listed()):
            log.debug("%s: action %s: the box has no tool %s", self.mcp.peer, code, call.tool)
            return
        try:
            answer = await self.mcp.send_call(call.tool, call.arguments, self._services.registry.timeout_s)
        except DeviceToolError as exc:
            log.warning("%s: action %s -> %s not sent: %s: %s", self.mcp.peer, code, call.tool, exc.code, exc.text)
            return
        self._spawn(self._answered(code, call.tool, call.arguments, answer), f"mcp-action {self.mcp.peer}")

    async def _answered(self, code: str, tool: str, arguments: dict[str, Any], answer: Awaitable[str]) -> None:
        try:
            result = await answer
        except DeviceToolError as exc:
            log.warning("%s: action %s -> %s failed: %s: %s", self.mcp.peer, code, tool, exc.code, exc.text)
            return
        log.info("%s: action %s -> %s %s: %s", self.mcp.peer, code, tool, arguments, result[:200])

    async def close(self) -> None:
        self._services.registry.detach(self._device_id, self.mcp)
        self.mcp.close()
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
