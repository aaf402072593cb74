"""An MCP client's task ends when cancelled even when the SDK loses the cancellation: its anyio task
groups can raise a transport error that coincides with the cancel (a 401, a closed stream) as an
exception group without the CancelledError. Seen with the real SDK and a real HTTP server under load
(tests/brain/test_mcp_tools.py, the intruder with a wrong token): the client kept reconnecting and
the gateway's shutdown waited for it. Here the SDK's part is played by a stand-in that does exactly
that, so the case comes every time."""

from __future__ import annotations

import asyncio

from gateway.brain.mcp_client import McpClients, McpServerTools
from gateway.config import McpServerConfig


class SwallowingServer(McpServerTools):
    """A connection attempt that turns our cancellation into a transport error, as anyio can."""

    def __init__(self, cfg: McpServerConfig) -> None:
        super().__init__(cfg, backoff_s=(0.01,))
        self.attempts = 0
        self.trying = asyncio.Event()

    async def _connect_once(self) -> None:
        self.attempts += 1
        self.trying.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            raise ExceptionGroup("unhandled errors in a TaskGroup", [RuntimeError("401 Unauthorized")]) from None
        raise RuntimeError("401 Unauthorized")


async def test_a_client_whose_cancellation_the_sdk_swallows_still_ends() -> None:
    server = SwallowingServer(McpServerConfig(name="intruder", url="http://127.0.0.1:9/mcp"))
    task = asyncio.create_task(server.run())
    await asyncio.wait_for(server.trying.wait(), 5)
    task.cancel()
    done, _ = await asyncio.wait({task}, timeout=5)
    assert done, f"still reconnecting after the cancel ({server.attempts} attempts)"
    assert task.cancelled()
    assert server.attempts == 1 and not server.connected.is_set()


async def test_the_clients_of_every_server_end_together() -> None:
    clients = McpClients([McpServerConfig(name="a", url="http://127.0.0.1:9/mcp")])
    clients.servers = {"a": SwallowingServer(clients.servers["a"].cfg)}  # every attempt swallows
    task = asyncio.create_task(clients.run())
    await asyncio.wait_for(clients.servers["a"].trying.wait(), 5)
    task.cancel()
    done, _ = await asyncio.wait({task}, timeout=5)
    assert done and task.cancelled()


class FailingServer(McpServerTools):
    """Every attempt fails at once with the SDK's kind of error, no cancellation anywhere."""

    def __init__(self, cfg: McpServerConfig) -> None:
        super().__init__(cfg, backoff_s=(0.01,))
        self.attempts = 0

    async def _connect_once(self) -> None:
        self.attempts += 1
        raise ExceptionGroup("unhandled errors in a TaskGroup", [RuntimeError("401 Unauthorized")])


async def test_a_failed_attempt_without_a_cancel_is_retried() -> None:
    server = FailingServer(McpServerConfig(name="flaky", url="http://127.0.0.1:9/mcp"))
    task = asyncio.create_task(server.run())
    try:
        for _ in range(500):
            if server.attempts >= 3:
                break
            await asyncio.sleep(0.01)
        assert server.attempts >= 3 and not task.done()  # a plain failure keeps the back-off loop going
        assert "RuntimeError: 401 Unauthorized" in server.unavailable()
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
