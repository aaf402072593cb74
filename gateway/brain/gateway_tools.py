"""The gateway's own tools for the LLM: search the user's memory."""

from __future__ import annotations

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
