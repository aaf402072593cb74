"""100 Hellos at once do not stall other devices: each session's VAD is cloned off the event loop
(`EngineRunner.clone_vad`), so a connected WebSocket device's ping is answered while the clones
are still being made. (How long a Silero clone takes is measured by `gateway bench`.)"""

from __future__ import annotations

import asyncio
import threading

from firmware_protocol import Hello, Ping, Pong, Welcome, decode, encode
from gateway.app import Gateway
from gateway.engines.fake import FakeAsr, FakeTts, FakeVad
from gateway.engines.runner import EngineRunner
from gateway.links.device_side import open_device
from gateway.links.websocket import WebSocketLink


class GatedVad(FakeVad):
    """A VAD whose clones block while the gate is closed, like a slow Silero clone, forever-ish."""

    def __init__(self, gate: threading.Event, made: list[int]) -> None:
        super().__init__()
        self.gate, self.made = gate, made

    def clone(self) -> FakeVad:
        assert self.gate.wait(30), "the gate was never opened"
        self.made.append(1)
        return FakeVad()


async def _hello(url: str, device: str):
    conn = await open_device("ws", url, device)
    await conn.send(encode(Hello(device_id=device)))
    return conn


async def _welcomed(conn) -> None:
    assert isinstance(decode(await asyncio.wait_for(conn.recv(), 30)), Welcome)


async def _connect(url: str, device: str):
    conn = await _hello(url, device)
    await _welcomed(conn)
    return conn


async def _ping(conn, nonce: int) -> None:
    await conn.send(encode(Ping(nonce)))
    async with asyncio.timeout(30):
        while not (isinstance(msg := decode(await conn.recv()), Pong) and msg.nonce == nonce):
            pass


async def test_a_devices_ping_is_answered_while_100_hellos_wait_for_their_vad_clones(fake_cfg) -> None:
    gate, made = threading.Event(), []
    gate.set()
    runner = EngineRunner(GatedVad(gate, made), FakeAsr(), FakeTts())
    link = WebSocketLink("127.0.0.1", 0, fake_cfg.server.websocket_path, fake_cfg.server.max_frame_bytes)
    ready = asyncio.Event()
    task = asyncio.create_task(Gateway(fake_cfg, runner, [link]).serve(ready))
    try:
        await asyncio.wait_for(ready.wait(), 10)
        url = f"ws://127.0.0.1:{link.port}{fake_cfg.server.websocket_path}"
        box = await _connect(url, "box-steady")
        await _ping(box, 1)
        gate.clear()  # from now on every clone blocks until the gate opens
        flood = await asyncio.gather(*(_hello(url, f"flood-{i}") for i in range(100)))
        await _ping(box, 2)  # answered while the 100 sessions still wait for their detectors
        assert len(made) == 1  # only box-steady's detector exists yet
        gate.set()
        await asyncio.gather(*(_welcomed(conn) for conn in flood))  # then every new device is welcomed
        await asyncio.gather(*(_ping(conn, 3) for conn in flood))  # ... and served
        assert len(made) == 101
        for conn in (box, *flood):
            await conn.close()
    finally:
        gate.set()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        runner.close()
