"""Every member's console lists a WebSocket box (no status on the broker) online while its session
lives, on whichever member, and offline when it ended there.

Two member processes (gateway/cli/cluster_target.py, fake voice engines) with their device
WebSocket ports, as behind a load balancer, and their consoles, on a real mosquitto and the
embedded PostgreSQL. The box says Hello to A: both consoles' Cluster table say online, served by
A. It closes: offline (A's record: the session ended). Hello to A again, then to B with A's
session open (the balancer moved it): A's session ends with 4409 and both consoles say online,
served by B, also a while after A's session ended (A's end never overwrites B's record). It closes
on B: offline, served last by B.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from websockets.exceptions import ConnectionClosed

from gateway.cli.cluster_rig import ClusterRig
from gateway.links.mosquitto import find_mosquitto
from tests.cluster.test_session_leases import ws_hello
from tests.console.conftest import Client
from tests.links.conftest import free_port

pytestmark = pytest.mark.skipif(find_mosquitto() is None, reason="needs mosquitto (Debian package mosquitto)")

MEMBERS = ["gw-a", "gw-b"]
BOX = "ws-directory-box"
PASSWORD = "cluster console password"


async def cluster_entry(console: Client) -> dict | None:
    devices = (await console.request("GET", "/console/api/devices")).json()
    return next((d for d in devices["cluster"]["devices"] if d["device_id"] == BOX), None)


async def until_listed(consoles: dict[str, Client], online: bool, gateway: str, timeout: float = 10) -> dict:
    """Each member's Cluster entry for the box once it says `online` / `gateway` (the last one)."""
    entries: dict[str, dict | None] = {}
    try:
        async with asyncio.timeout(timeout):
            while True:
                entries = {m: await cluster_entry(c) for m, c in consoles.items()}
                if all(e is not None and e["online"] is online and e["gateway"] == gateway for e in entries.values()):
                    return entries
                await asyncio.sleep(0.1)
    except TimeoutError:
        raise AssertionError(f"wanted online={online} gateway={gateway}, the consoles list {entries}") from None


async def test_a_websocket_box_is_listed_online_while_its_session_lives_on_either_member(postgres_dsn,
                                                                                        tmp_path: Path):
    rig = ClusterRig(tmp_path, postgres_dsn)
    rig.start_broker()
    ws = {m: free_port() for m in MEMBERS}
    screens = {m: free_port() for m in MEMBERS}
    try:
        await rig.start_members(MEMBERS, {m: {"websocket_port": ws[m], "screens_port": screens[m],
                                              "console_password": PASSWORD} for m in MEMBERS})
        consoles = {m: Client(f"127.0.0.1:{screens[m]}") for m in MEMBERS}
        for console in consoles.values():
            assert (await console.login(PASSWORD)).status == 200

        on_a = await ws_hello(ws["gw-a"], BOX)
        first = await until_listed(consoles, True, "gw-a")
        await on_a.close()
        ended = await until_listed(consoles, False, "gw-a")
        assert ended["gw-b"]["epoch"] == first["gw-b"]["epoch"]  # the same session's record, now ended

        on_a = await ws_hello(ws["gw-a"], BOX)
        await until_listed(consoles, True, "gw-a")
        on_b = await ws_hello(ws["gw-b"], BOX)  # moved by the balancer: A's session still open
        with pytest.raises(ConnectionClosed):
            async with asyncio.timeout(15):
                while True:
                    await on_a.recv()
        assert on_a.close_code == 4409
        moved = await until_listed(consoles, True, "gw-b")
        await asyncio.sleep(1.5)  # whatever A publishes as its session ends has arrived by now
        assert await until_listed(consoles, True, "gw-b", timeout=0.5) == moved
        await on_b.close()
        last = await until_listed(consoles, False, "gw-b")
        assert last["gw-a"]["epoch"] == moved["gw-a"]["epoch"] > first["gw-a"]["epoch"]
    finally:
        await rig.stop()
    for m in MEMBERS:
        assert f"cluster {m}: ignored" not in rig.log(m)
