"""MCP over streamable HTTP from a LAN client (the official SDK client on 127.0.0.1 with the
Host header of a LAN name): the SDK's localhost-only Host check does not refuse it with 421, the
scheme `Bearer` is case-insensitive, and the server reports the gateway's version."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import pytest_asyncio
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from gateway import __version__
from gateway.mcp_server.http import serve_http
from gateway.mcp_server.tools import McpDeps, build_server
from gateway.memory.service import MemoryService

pytestmark = pytest.mark.asyncio
TOKEN = "lan-token-0123456789"


class Devices:
    def connected(self) -> list[str]:
        return ["voicebox-kitchen"]


@pytest_asyncio.fixture
async def lan_mcp(tmp_path: Path) -> AsyncIterator[int]:
    """The MCP HTTP endpoint on loopback (its port); the memory is never opened (no tool here uses it)."""
    memory = MemoryService(tmp_path / "m.db", lambda: None)
    server = build_server(McpDeps(memory, Devices()))  # type: ignore[arg-type]
    ready = asyncio.Event()
    task = asyncio.create_task(serve_http(server, "127.0.0.1", 0, TOKEN, ready))
    await asyncio.wait_for(ready.wait(), 10)
    yield server.settings.port
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


@pytest.mark.parametrize("scheme", ["bearer", "BEARER", "Bearer"])
async def test_a_lan_client_with_any_case_of_bearer_is_served_and_told_the_gateways_version(lan_mcp, scheme):
    headers = {"Authorization": f"{scheme} {TOKEN}", "Host": f"gateway-box.lan:{lan_mcp}"}
    async with asyncio.timeout(30):
        async with httpx.AsyncClient(headers=headers) as http, \
                streamable_http_client(f"http://127.0.0.1:{lan_mcp}/mcp", http_client=http) as (read, write, _), \
                ClientSession(read, write) as session:
            init = await session.initialize()
            result = await session.call_tool("list_devices", {})
    assert init.serverInfo.version == __version__ and init.serverInfo.name == "edge-voice-gateway-memory"
    assert not result.isError and "voicebox-kitchen" in result.content[0].text


async def test_a_lan_request_without_the_token_is_still_401_and_logged(lan_mcp, caplog):
    body = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    with caplog.at_level(logging.WARNING, logger="gateway.mcp_server.http"):
        async with httpx.AsyncClient() as client:  # e.g. a DNS-rebound page: it has no token to send
            r = await client.post(f"http://127.0.0.1:{lan_mcp}/mcp", json=body,
                                  headers={"Host": "gateway-box.lan", "Origin": "http://evil.example"})
            wrong = await client.post(f"http://127.0.0.1:{lan_mcp}/mcp", json=body,
                                      headers={"Host": "gateway-box.lan", "Authorization": f"bearer{TOKEN}"})
    assert r.status_code == 401 and r.json()["error"] == "auth-failed" and wrong.status_code == 401
    assert "mcp http 127.0.0.1:" in caplog.text and "auth-failed" in caplog.text


async def test_serving_http_without_a_token_is_refused(tmp_path):
    from gateway.mcp_server.http import http_app

    with pytest.raises(ValueError, match="bearer token"):
        http_app(build_server(McpDeps(MemoryService(tmp_path / "m.db", lambda: None))), "")
