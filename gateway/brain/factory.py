"""Build the brain from the config: local (+ memory) as before, or CloudBrain when providers exist."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from gateway.brain.memory import MemoryBrain
from gateway.brain.contract import Brain
from gateway.brain.local import LocalBrain

if TYPE_CHECKING:
    from gateway.brain.history_store import HistoryStore
    from gateway.brain.tools import ToolSource
    from gateway.devices.device_tools import DeviceTools
    from gateway.config import GatewayConfig
    from gateway.brain.mcp_client import McpClients
    from gateway.memory.service import MemoryService


def build_mcp_clients(cfg: GatewayConfig) -> McpClients | None:
    """The external MCP servers' tools (brain.mcp_servers), when an LLM is there to use them.
    Their connections are kept by `McpClients.run()` (Gateway.serve starts it)."""
    if not (cfg.brain.providers and cfg.brain.mcp_servers) or cfg.brain.route == "local_only":
        return None
    from gateway.brain.mcp_client import McpClients  # imports the mcp SDK only when it is used

    return McpClients(cfg.brain.mcp_servers)


def build_brain(cfg: GatewayConfig, memory: MemoryService | None,
                connected: Callable[[], list[str]] | None = None, mcp: ToolSource | None = None,
                own_tools: DeviceTools | None = None, users: Mapping[str, str] | None = None,
                history_store: HistoryStore | None = None) -> Brain:
    """`own_tools`: the connected devices' own tools, offered to the LLM as `device__<tool>`
    while it answers that device. `users`: device id -> person, live (the gateway's DevicePeople;
    default memory.users), whose conversation history a device continues. `history_store`: where
    the histories are shared with other gateways (storage.backend postgres); None: RAM only."""
    local = LocalBrain.from_config(cfg)
    remembering = MemoryBrain(local, memory) if memory is not None else None
    if not cfg.brain.providers or cfg.brain.route == "local_only":
        return remembering or local
    from gateway.brain.cloud import CloudBrain  # imports the openai SDK only when it is used
    from gateway.brain.device_tool_source import DeviceToolsForBrain
    from gateway.brain.gateway_tools import device_tools, memory_tools
    from gateway.brain.llm import LlmProvider
    from gateway.brain.tools import Toolbox

    return CloudBrain(local, [LlmProvider(p) for p in cfg.brain.providers], memory=remembering,
                      system_prompt=cfg.brain.system_prompt, history_tokens=cfg.brain.history_tokens,
                      clauses=cfg.brain.split == "clause",
                      tools=Toolbox([*(memory_tools(memory) if memory else []),
                                     *(device_tools(connected) if connected else [])],
                                    [mcp] if mcp is not None else [],
                                    [DeviceToolsForBrain(own_tools)] if own_tools is not None else []),
                      prestart=cfg.brain.prestart, route=cfg.brain.route,
                      interrupted_reply=cfg.brain.interrupted_reply,
                      users=cfg.memory.users if users is None else users, history_store=history_store)


async def drain_brain(brain: Brain) -> None:
    """Wait for the brain's background memory writes (shutdown, tests): `Brain.drain`."""
    await brain.drain()
