"""The MCP tools: seven memory tools with the seed's semantics, plus device tools.

Dependencies come through the server's lifespan context (`McpDeps`), never globals. Tools raise
on bad input; the SDK turns the exception into an error result with its message.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, Protocol

from mcp.server.fastmcp import Context, FastMCP
from pydantic import Field

from gateway import __version__
from gateway.memory.retrieval import group_by_type
from gateway.memory.service import MemoryService
from gateway.memory.tags import KINDS

Kind = Literal["event", "fact", "rule", "preference", "decision", "error", "insight", "reading", "note"]
assert set(Kind.__args__) == set(KINDS)  # noqa: S101 - the tool schema and the tag rules agree


class DeviceControl(Protocol):
    """What the running gateway offers the device tools (see devices.GatewayDevices)."""

    def connected(self) -> list[str]: ...

    def served(self) -> list[dict[str, Any]]: ...

    async def say(self, device_id: str, text: str) -> None: ...

    async def perform_action(self, device_id: str, code: str, behavior: str, affect: str, intensity: int) -> None: ...

    def list_device_tools(self, device_id: str) -> list[dict[str, Any]]: ...

    async def call_device_tool(self, device_id: str, name: str, arguments: dict[str, Any]) -> str: ...


@dataclass
class McpDeps:
    memory: MemoryService
    devices: DeviceControl | None = None  # None when served by `gateway mcp` (no devices here)
    extra: dict[str, Any] = field(default_factory=dict)


User = Annotated[str | None, Field(description="whose memory (a user id); default: the gateway's default user")]


def _deps(ctx: Context) -> McpDeps:
    return ctx.request_context.lifespan_context


def _user(deps: McpDeps, username: str | None) -> str:
    return username or deps.memory.default_user


def build_server(deps: McpDeps, **settings: Any) -> FastMCP:
    """A FastMCP server whose tools use `deps` (handed in through the lifespan)."""

    @asynccontextmanager
    async def lifespan(_: FastMCP) -> AsyncIterator[McpDeps]:
        yield deps

    mcp = FastMCP("edge-voice-gateway-memory", lifespan=lifespan, instructions=(
        "Long-term memory of the people this gateway serves (conversations, device observations, "
        "sensor readings, rules, reflections) and its connected devices. Call memory_get_schema "
        "first to learn the kinds and tag namespaces."), **settings)
    mcp._mcp_server.version = __version__  # FastMCP takes no version: else initialize reports the SDK's

    @mcp.tool()
    async def memory_remember(
        ctx: Context, content: Annotated[str, Field(description="the memory, one self-contained sentence")],
        kind: Annotated[Kind, Field(description="what it is")] = "event",
        source: Annotated[str, Field(description="who writes it (your agent name, a device id)")] = "mcp",
        persistent: Annotated[bool, Field(description="long-term (rules and preferences)")] = False,
        extra_tags: Annotated[list[str], Field(description="namespace:value tags, e.g. domain:homecare")] = [],  # noqa: B006
        importance: Annotated[int | None, Field(ge=0, le=10, description="0-10; default: local heuristic")] = None,
        username: User = None,
    ) -> dict:
        """Write one memory (an observation node) with normalised tags; returns its id and tags."""
        d = _deps(ctx)
        node = await d.memory.remember(_user(d, username), content, kind=kind, source=source, persistent=persistent,
                                       extra_tags=extra_tags, importance=importance)
        return {"ok": True, "node_id": node.id, "tags": list(node.tags), "importance": node.importance}

    @mcp.tool()
    async def memory_search(
        ctx: Context, query: Annotated[str, Field(description="what to look for, in plain words")],
        n: Annotated[int, Field(ge=1, le=100)] = 10,
        filter_tags_all: Annotated[list[str], Field(description="nodes must carry all of these tags")] = [],  # noqa: B006
        filter_tags_any: Annotated[list[str], Field(description="... and at least one of these (ns:* = any value)")] = [],  # noqa: B006
        username: User = None,
    ) -> dict:
        """Semantic search scored by relevance and importance, with tag filters; results best first
        and grouped by node type (observation, conversation, reflection)."""
        d = _deps(ctx)
        found = await d.memory.search(_user(d, username), query, n, all_of=filter_tags_all, any_of=filter_tags_any)
        grouped = {t: [r.node.id for r in rs] for t, rs in group_by_type(found).items()}
        return {"results": [r.as_dict() for r in found], "ids_by_type": grouped}

    @mcp.tool()
    async def memory_get_recent(ctx: Context, n: Annotated[int, Field(ge=1, le=200)] = 10,
                                username: User = None) -> list[dict]:
        """The n newest memories, newest first."""
        d = _deps(ctx)
        return [node.as_dict() for node in await d.memory.recent(_user(d, username), n)]

    @mcp.tool()
    async def memory_get_active_rules(ctx: Context, username: User = None) -> list[dict]:
        """Every rule in force: nodes tagged kind:rule and persistent:true, not state:disabled."""
        d = _deps(ctx)
        return [node.as_dict() for node in await d.memory.active_rules(_user(d, username))]

    @mcp.tool()
    async def memory_get_reflections(ctx: Context, n: Annotated[int, Field(ge=1, le=100)] = 5,
                                     username: User = None) -> list[dict]:
        """The newest reflection (insight) nodes."""
        d = _deps(ctx)
        return [node.as_dict() for node in await d.memory.reflections(_user(d, username), n)]

    @mcp.tool()
    async def memory_get_user_profile(ctx: Context, username: User = None) -> dict:
        """The user's portrait (rewritten daily) and the extra information added by people."""
        d = _deps(ctx)
        return await d.memory.profile(_user(d, username))

    @mcp.tool()
    async def memory_get_schema(ctx: Context) -> dict:
        """Node types, kinds and tag namespaces, to align your parameters with the memory."""
        return _deps(ctx).memory.schema()

    @mcp.tool()
    async def list_devices(ctx: Context) -> list[str]:
        """Ids of the devices connected to the gateway right now."""
        return _devices(_deps(ctx)).connected()

    @mcp.tool()
    async def list_cluster_devices(ctx: Context) -> list[dict]:
        """Every device of the cluster (cluster mode) or of this gateway: device_id, online (its MQTT
        status), gateway (the member serving it now; null: nobody, or this gateway on a single box),
        epoch (its lease) and since (unix time the member took it)."""
        return _devices(_deps(ctx)).served()

    @mcp.tool()
    async def say(ctx: Context, device_id: Annotated[str, Field(description="a connected device (list_devices)")],
                  text: Annotated[str, Field(min_length=1, max_length=1000, description="what to say")]) -> dict:
        """Speak `text` on a voice box now (interrupts what it is saying)."""
        await _devices(_deps(ctx)).say(device_id, text)
        return {"ok": True}

    @mcp.tool()
    async def perform_action(
        ctx: Context, device_id: Annotated[str, Field(description="a connected device (list_devices)")],
        code: Annotated[str, Field(min_length=1, description="action code, e.g. greeting.hello, guidance.invite")],
        behavior: Annotated[str, Field(description="body-movement anchor: nod, wave, invite, ...")] = "",
        affect: Annotated[str, Field(description="expression style: smile, warm, serious, ...")] = "",
        intensity: Annotated[int, Field(ge=0, le=100, description="percent")] = 50,
    ) -> dict:
        """Send an Action (Fay's action semantics) to a device: robots move, avatars animate."""
        await _devices(_deps(ctx)).perform_action(device_id, code, behavior, affect, intensity)
        return {"ok": True}

    @mcp.tool()
    async def list_device_tools(
        ctx: Context, device_id: Annotated[str, Field(description="a connected device (list_devices)")],
    ) -> list[dict]:
        """The device's own tools (a xiaozhi box's volume, screen, servo motions): name, description, inputSchema."""
        return _devices(_deps(ctx)).list_device_tools(device_id)

    @mcp.tool()
    async def call_device_tool(
        ctx: Context, device_id: Annotated[str, Field(description="a connected device (list_devices)")],
        name: Annotated[str, Field(min_length=1, description="a tool of list_device_tools, e.g. self.audio_speaker.set_volume")],
        arguments: Annotated[dict[str, Any], Field(description="the tool's arguments (its inputSchema)")] = {},  # noqa: B006
    ) -> dict:
        """Call one of the device's own tools; its text result."""
        return {"result": await _devices(_deps(ctx)).call_device_tool(device_id, name, arguments)}

    @mcp.tool()
    async def latest_readings(
        ctx: Context, kind: Annotated[str | None, Field(description="e.g. blood_pressure; default: all")] = None,
        n: Annotated[int, Field(ge=1, le=200)] = 10, username: User = None,
    ) -> list[dict]:
        """The newest sensor readings remembered for a user, newest first."""
        d = _deps(ctx)
        tags = [f"reading:{kind}"] if kind else ["reading:*"]
        nodes = await d.memory.recent(_user(d, username), n, all_of=["kind:event"], any_of=tags, types=["observation"])
        return [node.as_dict() for node in nodes]

    return mcp


def _devices(deps: McpDeps) -> DeviceControl:
    if deps.devices is None:
        raise RuntimeError("devices are only reachable through the running gateway's MCP endpoint "
                           "(set mcp.http: true and connect to http://<gateway>:<mcp.port>/mcp)")
    return deps.devices
