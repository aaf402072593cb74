"""A stock xiaozhi box on the WebSocket in cluster mode: its session holds the lease like the own
protocol's, and when the box opens its channel through another member (the balancer sent it
there), the first member closes its old connection the same way: code 4409 `lease-lost: ...` and
nothing before it (the firmware reads no close code: any close ends its audio channel and it goes
idle, docs/XIAOZHI.md). Two member processes with the xiaozhi endpoints, on a real mosquitto and
the embedded PostgreSQL; the box emulator of tests/links/xiaozhi/box.py (written from the
firmware's source)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from gateway.cli.cluster_rig import ClusterRig
from gateway.links.mosquitto import find_mosquitto
from tests.cluster.test_session_leases import lease_row
from tests.links.conftest import free_port
from tests.links.xiaozhi.box import XiaozhiBox

pytestmark = pytest.mark.skipif(find_mosquitto() is None, reason="needs mosquitto (Debian package mosquitto)")

MEMBERS = ["gw-a", "gw-b"]
MAC = "a0:b1:c2:17:00:03"
DEVICE = "xiaozhi-a0b1c2170003"


async def test_a_xiaozhi_box_that_opens_its_channel_on_another_member_gets_4409_from_the_first(postgres_dsn,
                                                                                                tmp_path: Path):
    rig = ClusterRig(tmp_path, postgres_dsn)
    rig.start_broker()
    ws = {m: free_port() for m in MEMBERS}
    on_a = XiaozhiBox(mac=MAC)
    try:
        await rig.start_members(MEMBERS, {m: {"websocket_port": ws[m], "xiaozhi": True} for m in MEMBERS})
        status, _ = await on_a.ota(f"http://127.0.0.1:{ws['gw-a']}/xiaozhi/ota/")  # enrolled on the shared registry
        assert status == 200 and on_a.ws_url == f"ws://127.0.0.1:{ws['gw-a']}/xiaozhi/v1/" and on_a.token
        await on_a.open()
        holder, epoch_a, live = lease_row(postgres_dsn, DEVICE)
        assert (holder, live) == ("gw-a", True)
        async with asyncio.timeout(10):  # after its hello A lists the box's own tools (MCP, paged)
            while (before := len(on_a.messages)) == 0 or on_a.mcp_methods.count("tools/list") < 2:
                await asyncio.sleep(0.05)
        await asyncio.sleep(0.3)
        before = len(on_a.messages)

        # the same box (its MAC, Client-Id and token) through the balancer to B, A's channel still open
        on_b = XiaozhiBox(mac=MAC, client_id=on_a.client_id, token=on_a.token,
                          ws_url=f"ws://127.0.0.1:{ws['gw-b']}/xiaozhi/v1/")
        hello = await on_b.open()
        assert hello["transport"] == "websocket"
        assert on_a.ws is not None
        await asyncio.wait_for(on_a.ws.wait_closed(), 15)  # A ends it by itself
        assert on_a.ws.close_code == 4409 and on_a.ws.close_reason.startswith("lease-lost: ")
        assert on_a.messages[before:] == []  # not a message of A's besides the close
        holder, epoch_b, live = lease_row(postgres_dsn, DEVICE)
        assert (holder, live) == ("gw-b", True) and epoch_b > epoch_a
        await on_b.close()
    finally:
        await rig.stop()
    assert f"({DEVICE}): lease-lost: " in rig.log("gw-a")
