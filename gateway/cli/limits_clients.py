"""The WebSocket clients of `gateway bench-limits` (gateway/cli/bench_limits.py).

The steady device (`welcomed` from 127.0.0.1, then a `Pinger`: a Ping every PING_EVERY_S and the
round trips of those answered, `figures` of them) and the attacker's connections (`attempt` from
127.0.0.2: one Hello each, and what answered it).
"""

from __future__ import annotations

import asyncio
import statistics
import time

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake

from firmware_protocol import Error, Hello, Ping, Pong, Welcome, decode, encode
from gateway.cli.bench_stats import percentile

ATTACKER, DEVICE = "127.0.0.2", "127.0.0.1"
PING_EVERY_S = 0.02


def figures(rtts: list[float]) -> dict[str, float]:
    return {"pings": len(rtts), "p50_ms": round(statistics.median(rtts), 2) if rtts else float("nan"),
            "p95_ms": round(percentile(rtts, 0.95), 2), "max_ms": round(max(rtts, default=float("nan")), 2)}


class Pinger:
    """The steady device: a Ping every PING_EVERY_S, the round trips of those answered."""

    def __init__(self, ws: ClientConnection) -> None:
        self.ws, self.rtts, self._sent = ws, [], {}
        self._tasks = [asyncio.create_task(self._send()), asyncio.create_task(self._receive())]

    async def _send(self) -> None:
        nonce = 0
        while True:
            nonce += 1
            self._sent[nonce] = time.perf_counter()
            await self.ws.send(encode(Ping(nonce)))
            await asyncio.sleep(PING_EVERY_S)

    async def _receive(self) -> None:
        async for frame in self.ws:
            msg = decode(frame)
            if isinstance(msg, Pong) and (sent := self._sent.pop(msg.nonce, None)) is not None:
                self.rtts.append((time.perf_counter() - sent) * 1000)

    def take(self) -> list[float]:
        rtts, self.rtts = self.rtts, []
        return rtts

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


async def welcomed(url: str, device: str, token: str = "", source: str = DEVICE) -> ClientConnection:
    ws = await connect(url, open_timeout=30, compression=None, local_addr=(source, 0))
    await ws.send(encode(Hello(device_id=device, token=token)))
    reply = decode(await asyncio.wait_for(ws.recv(), 30))
    if not isinstance(reply, Welcome):
        raise RuntimeError(f"{device} was not welcomed: {reply}")
    return ws


async def attempt(url: str, device: str, token: str = "") -> tuple[ClientConnection | None, str]:
    """One attacker connection with a Hello: (the connection if still open, the answer's name/code)."""
    try:
        ws = await connect(url, open_timeout=30, compression=None, local_addr=(ATTACKER, 0))
    except (OSError, InvalidHandshake, TimeoutError) as exc:
        return None, f"connect failed ({type(exc).__name__})"
    try:
        await ws.send(encode(Hello(device_id=device, token=token)))
    except ConnectionClosed:
        pass
    try:
        reply = decode(await asyncio.wait_for(ws.recv(), 30))
    except (ConnectionClosed, TimeoutError) as exc:
        return None, f"no answer ({type(exc).__name__})"
    return ws, reply.code if isinstance(reply, Error) else reply.NAME


def count(answers: list[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for a in answers:
        out[a] = out.get(a, 0) + 1
    return out


async def settle(pinger: Pinger, seconds: float) -> list[float]:
    pinger.take()
    await asyncio.sleep(seconds)
    return pinger.take()
