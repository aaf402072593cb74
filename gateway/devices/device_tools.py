"""The tools connected devices offer (a xiaozhi box's own MCP tools: volume, screen, servo motions).

A device whose link speaks MCP to it (gateway/links/xiaozhi/box_mcp.py) attaches its client here
once the tools are listed, and detaches it when it goes. The LLM brain offers a device's tools
while it answers that device (gateway/brain/device_tool_source.py), the gateway's MCP server lets
agents list and call them (gateway/mcp_server/devices.py), and Action codes call them without the
LLM (gateway/devices/device_actions.py). A call that fails or times out raises `DeviceToolError`
with a stable code; its text is what the model or the agent sees.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class DeviceTool:
    name: str  # as the device names it, e.g. self.audio_speaker.set_volume
    description: str
    input_schema: dict[str, Any]

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "inputSchema": self.input_schema}


class DeviceToolError(Exception):
    """A device tool call failed: `code` (device-tool-error, device-tool-timeout, no-such-tool,
    device-unavailable, device-gone) and the text for the caller."""

    def __init__(self, code: str, text: str) -> None:
        super().__init__(f"{code}: {text}")
        self.code = code
        self.text = text


class ToolClient(Protocol):
    """One device's tools as its link reaches them."""

    peer: str

    def listed(self) -> list[DeviceTool]: ...

    async def call(self, name: str, arguments: dict[str, Any], timeout_s: float) -> str:
        """The tool's text result; raises DeviceToolError."""
        ...


class DeviceTools:
    """Device id -> the client of its tools (the newest connection wins, as in the SessionRegistry)."""

    def __init__(self, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self.timeout_s = timeout_s
        self._clients: dict[str, ToolClient] = {}
        self._changed = asyncio.Event()  # set (and replaced) whenever a device's tools come or go

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def wait_until(self, condition: Callable[["DeviceTools"], bool], timeout: float) -> None:
        """Wait until `condition(self)` holds (checked at each attach / detach); TimeoutError after `timeout` s."""
        async with asyncio.timeout(timeout):
            while not condition(self):
                await self._changed.wait()

    def attach(self, device_id: str, client: ToolClient) -> None:
        self._clients[device_id] = client
        self._notify()
        log.info("%s: %d device tools for %s: %s", client.peer, len(client.listed()), device_id,
                 ", ".join(t.name for t in client.listed()) or "none")

    def detach(self, device_id: str, client: ToolClient) -> None:
        if self._clients.get(device_id) is client:
            del self._clients[device_id]
            self._notify()

    def devices(self) -> list[str]:
        return sorted(self._clients)

    def listed(self, device_id: str) -> list[DeviceTool]:
        client = self._clients.get(device_id)
        return client.listed() if client is not None else []

    def has(self, device_id: str, name: str) -> bool:
        return any(t.name == name for t in self.listed(device_id))

    def _client(self, device_id: str) -> ToolClient:
        client = self._clients.get(device_id)
        if client is None:
            offering = ", ".join(self.devices()) or "none"
            raise DeviceToolError("device-unavailable", f"device {device_id!r} offers no tools now "
                                  f"(not connected, or it has no MCP tools); devices with tools: {offering}")
        return client

    async def call(self, device_id: str, name: str, arguments: dict[str, Any], timeout_s: float | None = None) -> str:
        client = self._client(device_id)
        if not any(t.name == name for t in client.listed()):
            raise DeviceToolError("no-such-tool", f"device {device_id!r} has no tool {name!r}; it offers: "
                                  + (", ".join(t.name for t in client.listed()) or "nothing"))
        if not isinstance(arguments, dict):
            raise DeviceToolError("device-tool-error", "the arguments must be a JSON object")
        return await client.call(name, arguments, self.timeout_s if timeout_s is None else timeout_s)
