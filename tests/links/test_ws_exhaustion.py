"""The WebSocket link of a gateway process (gateway/cli/limits_target.py: the links and limits of
`gateway run` on the fake ASR/TTS) when its file descriptors run out, and 100 Hellos at once
with the real Silero VAD cloned per session, with real sockets from outside the process."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from websockets.asyncio.client import ClientConnection, connect

from firmware_protocol import Hello, Ping, Pong, Welcome, decode, encode
from gateway.cli.limits_target import Target, started


@contextmanager
def target(tmp_path: Path, overrides: dict, nofile: int | None = None) -> Iterator[Target]:
    devices = {"database": str(tmp_path / "gateway.db"), **overrides.get("devices", {})}
    with started({**overrides, "devices": devices}, nofile) as gw:
        yield gw


async def _device(url: str, device: str) -> ClientConnection:
    ws = await connect(url, open_timeout=20, compression=None)
    await ws.send(encode(Hello(device_id=device)))
    assert isinstance(decode(await asyncio.wait_for(ws.recv(), 20)), Welcome)
    return ws


async def _ping_ms(ws: ClientConnection, nonce: int) -> float:
    t0 = time.perf_counter()
    await ws.send(encode(Ping(nonce)))
    async with asyncio.timeout(30):
        while not (isinstance(msg := decode(await ws.recv()), Pong) and msg.nonce == nonce):
            pass
    return (time.perf_counter() - t0) * 1000


def _raw_connections(port: int, n: int) -> list[socket.socket]:
    """TCP connections that never even start the WebSocket handshake, each holding one of the
    gateway's file descriptors once accepted (the kernel queues the rest)."""
    out = []
    for _ in range(n):
        s = socket.socket()
        s.setblocking(False)
        s.connect_ex(("127.0.0.1", port))
        out.append(s)
    return out


async def test_when_file_descriptors_run_out_accept_errors_are_one_line_per_interval_and_devices_get_back_in(
        tmp_path: Path) -> None:
    with target(tmp_path, {"fake_vad": True}, nofile=128) as gw:
        attack = _raw_connections(gw.port, 300)  # more than the 128 descriptors the gateway may hold
        await asyncio.sleep(4)  # asyncio retries the accept every second meanwhile
        failed = [line for line in gw.log if "accept-failed" in line]
        assert len(failed) == 1, gw.log[-20:]  # one line per 10 s interval, not one per retry
        assert "Too many open files" in failed[0] and "open files limit 128" in failed[0]
        assert not [line for line in gw.log if "Traceback" in line]
        for s in attack:
            s.close()
        box = await _device(gw.url, "box-after-the-flood")  # served again once the attacker is gone
        await _ping_ms(box, 1)  # and answered (both within their hang guards: 20 and 30 s)
        await box.close()
    assert any("open files limit 128 (the hard limit)" in line for line in gw.log)


@pytest.mark.models
async def test_100_hellos_at_once_with_the_real_vad_leave_another_devices_ping_answered(tmp_path: Path) -> None:
    with target(tmp_path, {"server": {"max_sessions": 200, "max_sessions_per_peer": 200}}) as gw:
        box = await _device(gw.url, "box-steady")
        assert await _ping_ms(box, 0) < 1000

        async def hello(i: int) -> ClientConnection:
            ws = await connect(gw.url, open_timeout=30, compression=None)
            await ws.send(encode(Hello(device_id=f"flood-{i}")))
            return ws

        flood = await asyncio.gather(*(hello(i) for i in range(100)))
        pings = [await _ping_ms(box, n) for n in range(1, 11)]  # while the 100 VAD clones are made
        assert max(pings) < 1000, pings  # generous: a clone on the loop took 7.2 s for 100
        welcomes = await asyncio.gather(*(asyncio.wait_for(ws.recv(), 60) for ws in flood))
        assert all(isinstance(decode(w), Welcome) for w in welcomes)
        for ws in (box, *flood):
            await ws.close()
