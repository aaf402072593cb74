"""Tools the LLM may call: name, JSON-schema parameters, and an async function of (args, device).

Errors go back to the model as the tool's result (it can rephrase or give up), never to the user.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

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


class Toolbox:
    def __init__(self, tools: list[Tool]) -> None:
        self._tools = {t.name: t for t in tools}

    def __bool__(self) -> bool:
        return bool(self._tools)

    def schemas(self) -> list[dict[str, Any]]:
        return [t.schema() for t in self._tools.values()]

    async def call(self, name: str, arguments: str, device_id: str) -> str:
        """The tool's result, or an `error: ...` text for the model."""
        tool = self._tools.get(name)
        if tool is None:
            return f"error: unknown tool {name!r}; available: {', '.join(self._tools)}"
        try:
            args = json.loads(arguments or "{}")
            if not isinstance(args, dict):
                raise ValueError("the arguments must be a JSON object")
            return (await tool.run(args, device_id))[:MAX_RESULT_CHARS]
        except Exception as exc:  # tool boundary: the model sees the error, the user never does
            log.warning("brain: tool %s failed for %s: %s: %s", name, device_id, type(exc).__name__, exc)
            return f"error: {type(exc).__name__}: {exc}"[:MAX_RESULT_CHARS]
