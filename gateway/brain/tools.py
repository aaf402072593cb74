"""Tools the LLM may call: name, JSON-schema parameters, and an async function of (args, device).

Errors go back to the model as the tool's result (it can rephrase or give up), never to the user.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

log = logging.getLogger(__name__)
MAX_RESULT_CHARS = 2000


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    parameters: dict[str, Any]
    run: Callable[[dict[str, Any], str], Awaitable[str]]  # (arguments, device id) -> result text

    def schema(self) -> dict[str, Any]:
        return {"type": "function",
                "function": {"name": self.name, "description": self.description, "parameters": self.parameters}}


class ToolSource(Protocol):
    """Tools that come and go while the gateway runs (e.g. external MCP servers connecting later)."""

    def tools(self) -> list[Tool]: ...

    def why_missing(self, name: str) -> str | None:
        """Why `name` is not available now (e.g. its server is down), or None if it is not ours."""
        ...


class DeviceToolSource(Protocol):
    """Tools of the device the LLM is answering (a xiaozhi box's own MCP tools)."""

    def tools_for(self, device_id: str) -> list[Tool]: ...

    def why_missing_for(self, device_id: str, name: str) -> str | None: ...


class Toolbox:
    def __init__(self, tools: list[Tool], sources: Sequence[ToolSource] = (),
                 device_sources: Sequence[DeviceToolSource] = ()) -> None:
        self._own = {t.name: t for t in tools}
        self._sources = list(sources)
        self._device_sources = list(device_sources)

    def _tools(self, device_id: str = "") -> dict[str, Tool]:
        found = dict(self._own)
        for source in self._sources:
            for tool in source.tools():
                found.setdefault(tool.name, tool)
        for device_source in self._device_sources if device_id else ():
            for tool in device_source.tools_for(device_id):
                found.setdefault(tool.name, tool)
        return found

    def __bool__(self) -> bool:  # device tools come with the device: offered per reply (schemas)
        return bool(self._tools()) or bool(self._device_sources)

    def schemas(self, device_id: str = "") -> list[dict[str, Any]]:
        """The tools offered to the model, those of `device_id` (the device it answers) included."""
        return [t.schema() for t in self._tools(device_id).values()]

    async def call(self, name: str, arguments: str, device_id: str) -> str:
        """The tool's result, or an `error: ...` text for the model."""
        tools = self._tools(device_id)
        tool = tools.get(name)
        if tool is None:
            why = next((w for s in self._sources if (w := s.why_missing(name))), None) or next(
                (w for s in self._device_sources if (w := s.why_missing_for(device_id, name))), None)
            return f"error: {why}" if why else f"error: unknown tool {name!r}; available: {', '.join(tools)}"
        try:
            args = json.loads(arguments or "{}")
            if not isinstance(args, dict):
                raise ValueError("the arguments must be a JSON object")
            return (await tool.run(args, device_id))[:MAX_RESULT_CHARS]
        except Exception as exc:  # tool boundary: the model sees the error, the user never does
            log.warning("brain: tool %s failed for %s: %s: %s", name, device_id, type(exc).__name__, exc)
            return f"error: {type(exc).__name__}: {exc}"[:MAX_RESULT_CHARS]
