"""The MCP tools, called by the official MCP SDK client over stdio (`gateway mcp`) and over
streamable HTTP / SSE on loopback (bearer token)."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import pytest_asyncio
from mcp import ClientSession, StdioServerParameters
from mcp.client.sse import sse_client
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from gateway.mcp_server.http import serve_http
from gateway.mcp_server.tools import McpDeps, build_server
from gateway.memory.service import MemoryService
from tests.memory.conftest import FakeClock, SharedEmbedder, embedder  # noqa: F401 - fixture

TOKEN = "test-token-0123456789"
MEMORY_TOOLS = {"memory_remember", "memory_search", "memory_get_recent", "memory_get_active_rules",
                "memory_get_reflections", "memory_get_user_profile", "memory_get_schema"}


def data(result) -> object:
    assert not result.isError, result.content[0].text
    if result.structuredContent is not None:
        sc = result.structuredContent
        return sc.get("result", sc) if set(sc) == {"result"} else sc
    return json.loads(result.content[0].text)


async def exercise_every_tool(session: ClientSession, devices: list[str] | None) -> None:
    names = {t.name for t in (await session.list_tools()).tools}
    assert MEMORY_TOOLS | {"list_devices", "latest_readings"} <= names
    schema = data(await session.call_tool("memory_get_schema", {}))
    assert "rule" in schema["kinds"] and "domain" in schema["tag_namespaces"]
    wrote = data(await session.call_tool("memory_remember", {
        "content": "Grandpa Li's blood pressure this morning was 158/95", "kind": "event", "source": "elderly_monitor",
        "extra_tags": ["domain:homecare", "date:2026-04-27", "reading:blood_pressure"], "username": "grandpa_li"}))
    assert wrote["ok"] and "domain:homecare" in wrote["tags"]
    data(await session.call_tool("memory_remember", {
        "content": "Grandpa must measure his blood pressure every morning; no reading by 9:00 means alert",
        "kind": "rule", "persistent": True, "source": "family_app", "extra_tags": ["schedule:daily"],
        "username": "grandpa_li"}))
    found = data(await session.call_tool("memory_search", {
        "query": "how high was his blood pressure?", "filter_tags_all": ["domain:homecare"], "username": "grandpa_li"}))
    assert found["results"][0]["node_id" if "node_id" in found["results"][0] else "id"] == wrote["node_id"]
    assert wrote["node_id"] in found["ids_by_type"]["observation"]
    recent = data(await session.call_tool("memory_get_recent", {"n": 5, "username": "grandpa_li"}))
    assert len(recent) == 2
    rules = data(await session.call_tool("memory_get_active_rules", {"username": "grandpa_li"}))
    assert [r["content"][:26] for r in rules] == ["Grandpa must measure his b"]
    assert data(await session.call_tool("memory_get_reflections", {"username": "grandpa_li"})) == []
    assert data(await session.call_tool("memory_get_user_profile", {"username": "grandpa_li"}))["user_id"] == "grandpa_li"
    readings = data(await session.call_tool("latest_readings", {"kind": "blood_pressure", "username": "grandpa_li"}))
    assert [r["id"] for r in readings] == [wrote["node_id"]]
    # someone else's memory stays apart
    assert data(await session.call_tool("memory_get_recent", {"username": "other"})) == []
    # bad input: an error result with a clear message, and the server keeps serving
    bad = await session.call_tool("memory_remember", {"content": "x", "extra_tags": ["nonamespace"]})
    assert bad.isError and "bad tag 'nonamespace'" in bad.content[0].text
    bad = await session.call_tool("memory_search", {"query": "", "username": "grandpa_li"})
    assert bad.isError and "query must not be empty" in bad.content[0].text
    listed = await session.call_tool("list_devices", {})
    said = await session.call_tool("say", {"device_id": "voicebox-kitchen", "text": "Time for your tea."})
    acted = await session.call_tool("perform_action", {"device_id": "voicebox-kitchen", "code": "greeting.hello",
                                                       "behavior": "wave", "intensity": 70})
    if devices is None:
        for result in (listed, said, acted):
            assert result.isError and "mcp.http" in result.content[0].text
    else:
        assert data(listed) == devices and data(said) == {"ok": True} and data(acted) == {"ok": True}
        nowhere = await session.call_tool("say", {"device_id": "attic", "text": "hi"})
        assert nowhere.isError and "'attic' is not connected" in nowhere.content[0].text


async def test_every_tool_works_over_stdio_with_the_sdk_client(tmp_path: Path) -> None:
    cfg = tmp_path / "gateway.yaml"
    cfg.write_text(f"memory:\n  path: {tmp_path / 'memory.db'}\n")
    params = StdioServerParameters(command=str(Path(sys.executable).parent / "gateway"),
                                   args=["mcp", "--config", str(cfg)])
    async with asyncio.timeout(60):
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            await exercise_every_tool(session, devices=None)


class Devices:
    """Stands in for the gateway's devices (the real ones are tested in tests/memory/test_gateway_memory.py)."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def connected(self) -> list[str]:
        return ["bp-monitor-1", "voicebox-kitchen"]

    async def say(self, device_id: str, text: str) -> None:
        if device_id not in self.connected():
            raise ValueError(f"device {device_id!r} is not connected")
        self.calls.append(("say", device_id, text))

    async def perform_action(self, device_id: str, code: str, behavior: str, affect: str, intensity: int) -> None:
        self.calls.append(("action", device_id, code, behavior, affect, intensity))


@pytest.fixture
def http_devices() -> Devices:
    return Devices()


@pytest_asyncio.fixture
async def http_mcp(tmp_path: Path, embedder: SharedEmbedder, http_devices: Devices) -> AsyncIterator[str]:  # noqa: F811
    async with MemoryService(tmp_path / "m.db", lambda: embedder, clock=FakeClock()) as memory:
        server = build_server(McpDeps(memory, http_devices))
        ready = asyncio.Event()
        task = asyncio.create_task(serve_http(server, "127.0.0.1", 0, TOKEN, ready))
        await asyncio.wait_for(ready.wait(), 10)
        yield f"http://127.0.0.1:{server.settings.port}"
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_every_tool_works_over_streamable_http_with_the_bearer_token(http_mcp: str, http_devices) -> None:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with asyncio.timeout(30):
        async with httpx.AsyncClient(headers=headers) as http, \
                streamable_http_client(f"{http_mcp}/mcp", http_client=http) as (read, write, _), \
                ClientSession(read, write) as session:
            await session.initialize()
            await exercise_every_tool(session, devices=["bp-monitor-1", "voicebox-kitchen"])
    assert http_devices.calls == [("say", "voicebox-kitchen", "Time for your tea."),
                                  ("action", "voicebox-kitchen", "greeting.hello", "wave", "", 70)]


async def test_sse_transport_serves_the_same_tools(http_mcp: str) -> None:
    async with asyncio.timeout(30):
        async with sse_client(f"{http_mcp}/sse", headers={"Authorization": f"Bearer {TOKEN}"}) as (read, write), \
                ClientSession(read, write) as session:
            await session.initialize()
            assert data(await session.call_tool("list_devices", {})) == ["bp-monitor-1", "voicebox-kitchen"]


@pytest.mark.parametrize("auth", [None, "Bearer wrong-token-0000000000", f"Basic {TOKEN}"])
async def test_http_without_the_right_token_is_refused_and_logged(http_mcp: str, auth: str | None, caplog) -> None:
    headers = {"Authorization": auth} if auth else {}
    async with httpx.AsyncClient() as client:
        r = await client.post(f"{http_mcp}/mcp", headers=headers, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert r.status_code == 401 and r.json()["error"] == "auth-failed"
    assert any("auth-failed" in rec.message and "127.0.0.1" in rec.message for rec in caplog.records)
