"""WebSocket and CoAP boxes in cluster mode: the lease follows the box to the member it says Hello to.

Two member processes (gateway/cli/cluster_target.py, fake voice engines) with their device
WebSocket and CoAP ports, as behind a load balancer, on a real mosquitto and the embedded
PostgreSQL. A box is served by member A (it gets its reply), then says Hello to member B while its
session on A is still open, as a box does that the balancer moved: B takes the lease at once, A's
session stops and is ended with the protocol's refusal (WebSocket close code 4409 `lease-lost`;
CoAP: its observation's last notification and every later request with its token 4.01
`lease-lost`), and A sends the box nothing else; B goes on serving it under the lease. The lease
SQL (`take`) is checked on the real table too.
"""

from __future__ import annotations

import asyncio
import time
import warnings
from pathlib import Path

import aiocoap
import psycopg
import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from firmware_protocol import Hello, Ping, Pong, ReplyText, StreamDeframer, TextInput, Welcome, decode, encode
from gateway.cli.cluster_rig import ClusterRig
from gateway.cluster.leases import PgLeases
from gateway.links.mosquitto import find_mosquitto
from gateway.storage.schema import migrate
from tests.links.conftest import free_port
from tests.links.test_coap_link import free_udp_port

pytestmark = pytest.mark.skipif(find_mosquitto() is None, reason="needs mosquitto (Debian package mosquitto)")

MEMBERS = ["gw-a", "gw-b"]


async def test_take_moves_a_live_lease_to_the_new_holder_with_the_next_epoch(postgres_dsn):
    with psycopg.connect(postgres_dsn) as conn:
        migrate(conn)
    a, b = PgLeases(postgres_dsn, "gw-a", 6, 5), PgLeases(postgres_dsn, "gw-b", 6, 5)
    try:
        [epoch] = (await a.claim(["take-box"])).values()
        assert await b.claim(["take-box"]) == {}  # a claim waits for the lease to run out
        assert await b.take(["take-box"]) == {"take-box": (epoch + 1, "gw-a")}  # a take does not
        assert await a.renew(["take-box"]) == {}  # the old holder's renewal finds it gone
        assert await b.take(["take-box"]) == {"take-box": (epoch + 2, None)}  # its own: no one to name
        await b.release(["take-box"])
        assert await a.take(["take-box"]) == {"take-box": (epoch + 3, None)}  # released: nobody held it
    finally:
        await a.close()
        await b.close()


async def members(tmp_path: Path, postgres_dsn: str) -> tuple[ClusterRig, dict[str, int], dict[str, int]]:
    rig = ClusterRig(tmp_path, postgres_dsn)
    rig.start_broker()
    ws = {m: free_port() for m in MEMBERS}
    coap = {m: free_udp_port() for m in MEMBERS}
    await rig.start_members(MEMBERS, {m: {"websocket_port": ws[m], "coap_port": coap[m]} for m in MEMBERS})
    return rig, ws, coap


def lease_row(dsn: str, device: str) -> tuple[str, int, bool]:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT holder, epoch, expires_at > now() FROM device_leases WHERE device_id = %s",
                           (device,)).fetchone()
    assert row is not None
    return row


async def ws_hello(port: int, device: str) -> ClientConnection:
    ws = await connect(f"ws://127.0.0.1:{port}/ws", compression=None)
    await ws.send(encode(Hello(device_id=device)))
    assert isinstance(decode(await asyncio.wait_for(ws.recv(), 10)), Welcome)
    return ws


async def ws_ask(ws: ClientConnection, text: str) -> str:
    await ws.send(encode(TextInput(text=text)))
    async with asyncio.timeout(20):
        while not (isinstance(msg := decode(await ws.recv()), ReplyText) and msg.final):
            pass
    return msg.text


async def test_a_websocket_box_that_says_hello_to_another_member_is_never_spoken_to_by_the_first_again(
        postgres_dsn, tmp_path: Path):
    box = "ws-roaming-box"
    rig, ws_ports, _ = await members(tmp_path, postgres_dsn)
    try:
        on_a = await ws_hello(ws_ports["gw-a"], box)
        assert (await ws_ask(on_a, "What time is it?")).startswith("It is")
        holder, epoch_a, live = lease_row(postgres_dsn, box)
        assert (holder, live) == ("gw-a", True)
        after_a: list[bytes] = []  # what reaches the box on A's connection from the takeover on

        async def read_a() -> None:
            try:
                async for frame in on_a:
                    after_a.append(frame)
            except ConnectionClosed:
                pass

        reader = asyncio.create_task(read_a())
        moved_at = time.monotonic()
        on_b = await ws_hello(ws_ports["gw-b"], box)  # the balancer sent the box to B: A's session is open
        welcomed_at = time.monotonic()
        await asyncio.wait_for(reader, 15)  # A ends it by itself
        closed_at = time.monotonic()
        assert after_a == []  # not a frame besides the close
        assert on_a.close_code == 4409 and on_a.close_reason.startswith("lease-lost: ")
        holder, epoch_b, live = lease_row(postgres_dsn, box)
        assert (holder, live) == ("gw-b", True) and epoch_b > epoch_a
        assert (await ws_ask(on_b, "What time is it?")).startswith("It is")  # B serves it under its lease
        assert lease_row(postgres_dsn, box)[:2] == ("gw-b", epoch_b)  # A released nothing of B's
        await on_b.close()
        print(f"\nWebSocket takeover: B's Welcome {welcomed_at - moved_at:.3f} s after the Hello, "
              f"A's close {closed_at - welcomed_at:.3f} s after B's Welcome")
    finally:
        await rig.stop()
    log_a = rig.log("gw-a")
    assert "ws 127.0.0.1:" in log_a and f"({box}): lease-lost: " in log_a
    assert f"cluster gw-b: took the lease on {box} (epoch {epoch_b}) for its session here, from gw-a" in rig.log("gw-b")


async def test_a_session_whose_lease_was_taken_unannounced_stops_at_its_next_renewal(postgres_dsn, tmp_path: Path):
    """No directory record on the broker this time (another holder took the row directly): the
    member finds out at its renewal (every lease_ttl_s / 3) and ends the session the same way."""
    box = "ws-renewal-box"
    rig = ClusterRig(tmp_path, postgres_dsn, cluster={"lease_ttl_s": 1.5})
    rig.start_broker()
    port = free_port()
    other = PgLeases(postgres_dsn, "gw-x", 1.5, 5)
    try:
        await rig.start_members(["gw-a"], {"gw-a": {"websocket_port": port}})
        on_a = await ws_hello(port, box)
        assert (await ws_ask(on_a, "What time is it?")).startswith("It is")
        [(epoch, previous)] = (await other.take([box])).values()
        assert previous == "gw-a"
        frames = []
        with pytest.raises(ConnectionClosed):
            async with asyncio.timeout(10):
                while True:
                    frames.append(await on_a.recv())
        assert frames == [] and on_a.close_code == 4409
        assert on_a.close_reason == "lease-lost: its lease was lost"
        assert lease_row(postgres_dsn, box)[:2] == ("gw-x", epoch)  # gw-a's release left it alone
    finally:
        await other.close()
        await rig.stop()
    assert f"cluster gw-a: lost the lease on {box}: its session ends" in rig.log("gw-a")


class Observation:
    """A CoAP observation of a member's `/gw/D/down` that keeps every notification with its time."""

    def __init__(self, ctx: aiocoap.Context, uri: str) -> None:
        self.seen: list[tuple[float, aiocoap.Message]] = []
        self.ended = asyncio.Event()
        self.request = ctx.request(aiocoap.Message(code=aiocoap.GET, uri=uri, observe=0))
        with warnings.catch_warnings():  # the callbacks keep every notification (the iterator is lossy)
            warnings.simplefilter("ignore", DeprecationWarning)
            self.request.observation.register_callback(lambda m: self.seen.append((time.monotonic(), m)))
            self.request.observation.register_errback(lambda exc: self.ended.set())

    def frames(self, since: float = 0.0) -> list[object]:
        deframer = StreamDeframer()
        return [f for at, m in self.seen if m.code.is_successful() and at >= since for f in deframer.feed(m.payload)]


async def coap_post(ctx: aiocoap.Context, uri: str, message) -> aiocoap.Message:
    return await asyncio.wait_for(ctx.request(aiocoap.Message(code=aiocoap.POST, uri=uri,
                                                              payload=encode(message))).response, 15)


async def test_a_coap_box_that_says_hello_to_another_member_gets_401_with_its_old_token(postgres_dsn, tmp_path: Path):
    box = "coap-roaming-box"
    rig, _, coap_ports = await members(tmp_path, postgres_dsn)
    base = {m: f"coap://127.0.0.1:{coap_ports[m]}/gw/{box}" for m in MEMBERS}
    ctx = await aiocoap.Context.create_client_context()
    try:
        welcome = StreamDeframer().feed((await coap_post(ctx, f"{base['gw-a']}/up", Hello(device_id=box))).payload)[0]
        assert isinstance(welcome, Welcome)
        token_a = welcome.session_id
        observation = Observation(ctx, f"{base['gw-a']}/down?s={token_a}")
        async with asyncio.timeout(15):  # observing once a POST's response is empty (the Pong is notified)
            while (await coap_post(ctx, f"{base['gw-a']}/up?s={token_a}", Ping(nonce=1))).payload:
                await asyncio.sleep(0.2)
        await coap_post(ctx, f"{base['gw-a']}/up?s={token_a}", TextInput(text="What time is it?"))
        async with asyncio.timeout(20):
            while not any(isinstance(f, ReplyText) and f.final for f in observation.frames()):
                await asyncio.sleep(0.1)
        assert lease_row(postgres_dsn, box)[0] == "gw-a"

        moved_at = time.monotonic()
        response = await coap_post(ctx, f"{base['gw-b']}/up", Hello(device_id=box))  # moved to B
        welcomed_at = time.monotonic()
        welcome_b = StreamDeframer().feed(response.payload)[0]
        assert isinstance(welcome_b, Welcome) and welcome_b.session_id != token_a
        await asyncio.wait_for(observation.ended.wait(), 15)  # A ends its observation by itself
        assert observation.frames(since=moved_at) == []  # not a byte of A's after the Hello to B
        ended_at, last = observation.seen[-1]
        assert str(last.code) == "4.01 Unauthorized" and last.payload.startswith(b"lease-lost: ")
        for request in (aiocoap.Message(code=aiocoap.POST, uri=f"{base['gw-a']}/up?s={token_a}", payload=encode(Ping(nonce=2))),
                        aiocoap.Message(code=aiocoap.GET, uri=f"{base['gw-a']}/down?s={token_a}")):
            refused = await asyncio.wait_for(ctx.request(request).response, 15)  # the old token, on A
            assert str(refused.code) == "4.01 Unauthorized"
            why = refused.payload.decode()  # the new holder's record, or A's failed renewal
            assert why.startswith("lease-lost: ") and why.endswith(f"; POST a Hello to /gw/{box}/up")
        pong = await coap_post(ctx, f"{base['gw-b']}/up?s={welcome_b.session_id}", Ping(nonce=3))
        assert StreamDeframer().feed(pong.payload) == [Pong(nonce=3)]  # B serves it
        holder, _, live = lease_row(postgres_dsn, box)
        assert (holder, live) == ("gw-b", True)
        print(f"\nCoAP takeover: B's Welcome {welcomed_at - moved_at:.3f} s after the Hello, "
              f"A's 4.01 notification {ended_at - welcomed_at:.3f} s after B's Welcome")
    finally:
        await ctx.shutdown()
        await rig.stop()
    log_a = rig.log("gw-a")
    assert "coap 127.0.0.1:" in log_a and f"({box}): lease-lost: " in log_a
    assert f"refused: lease-lost (the session of {box} here ended: " in log_a


def test_serial_sessions_take_no_lease():
    """A cable ends at one gateway: its connection does not roam, so its session takes no lease."""
    from gateway.links.base import Roaming
    from gateway.links.mqtt_connection import MqttDeviceConnection
    from gateway.links.serial_link import SerialConnection

    assert not issubclass(SerialConnection, Roaming) and not issubclass(MqttDeviceConnection, Roaming)
