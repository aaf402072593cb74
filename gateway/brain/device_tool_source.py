"""The answering device's own tools for the LLM, as `device__<tool>` (a xiaozhi box's MCP tools).

While the model answers a device, that device's tools (gateway/devices/device_tools.py) are
offered beside the gateway's and the external MCP servers' (`<server>__<tool>`): the box's
`self.audio_speaker.set_volume` becomes `device__self_audio_speaker_set_volume`, and the call
goes to that box. A failure or a timeout is the tool's result (`error: ...`) for the model.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Any

from gateway.brain.tools import Tool
from gateway.devices.device_tools import DeviceToolError, DeviceTools

PREFIX = "device__"
MAX_NAME = 64  # OpenAI function names: [A-Za-z0-9_-]{1,64}


def exposed_name(tool: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "_", PREFIX + tool)[:MAX_NAME]


class DeviceToolsForBrain:
    def __init__(self, tools: DeviceTools) -> None:
        self._tools = tools

    def tools_for(self, device_id: str) -> list[Tool]:
        offered: dict[str, Tool] = {}
        for t in self._tools.listed(device_id):
            name = exposed_name(t.name)
            offered.setdefault(name, Tool(name, f"On this device ({device_id}): {t.description}",
                                          t.input_schema, self._caller(t.name)))
        return list(offered.values())

    def why_missing_for(self, device_id: str, name: str) -> str | None:
        if not name.startswith(PREFIX):
            return None
        offered = ", ".join(exposed_name(t.name) for t in self._tools.listed(device_id))
        return (f"device {device_id!r} has no tool {name!r}; it offers: {offered}" if offered
                else f"device {device_id!r} offers no tools now")

    def _caller(self, tool: str) -> Callable[[dict[str, Any], str], Awaitable[str]]:
        async def run(args: dict[str, Any], device_id: str) -> str:
            try:
                return await self._tools.call(device_id, tool, args)
            except DeviceToolError as exc:
                return f"error: {exc.code}: {exc.text}"

        return run
