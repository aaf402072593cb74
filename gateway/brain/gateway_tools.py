"""The gateway's own tools for the LLM: search the user's memory, list the connected devices."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gateway.brain.tools import Tool
from gateway.memory.service import MemoryService


def memory_tools(memory: MemoryService) -> list[Tool]:
    async def search(args: dict[str, Any], device_id: str) -> str:
        query = str(args.get("query", "")).strip()
        if not query:
            raise ValueError("query must not be empty")
        hits = await memory.search(memory.user_for(device_id), query, 5, weights=memory.search_weights)
        return "\n".join(f"- {h.node.content}" for h in hits) or "nothing remembered about that"

    return [Tool("memory_search", "Search what you remember about this user (facts, readings, past talks).",
                 {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}, search)]


def device_tools(connected: Callable[[], list[str]]) -> list[Tool]:
    async def list_devices(args: dict[str, Any], device_id: str) -> str:
        others = sorted(connected())
        return "connected devices: " + (", ".join(others) if others else "none") + f" (you speak through {device_id})"

    return [Tool("list_devices", "The devices connected to the gateway now.",
                 {"type": "object", "properties": {}}, list_devices)]
