"""A device on a gateway WebSocket from a chosen loopback address (127.0.0.2 for an attacker,
127.0.0.1 for the device that must keep being served): the real websockets client library."""

from __future__ import annotations

import asyncio

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from firmware_protocol import Hello, Message, decode, encode


async def open_from(url: str, source: str, timeout: float = 10) -> ClientConnection:
    return await connect(url, open_timeout=timeout, compression=None, local_addr=(source, 0))


async def next_message(ws: ClientConnection, timeout: float = 10) -> Message:
    return decode(await asyncio.wait_for(ws.recv(), timeout))


async def hello(url: str, source: str, device: str, token: str = "",
                timeout: float = 10) -> tuple[ClientConnection, Message]:
    """Connect from `source`, say Hello as `device`: the connection and the gateway's answer."""
    ws = await open_from(url, source, timeout)
    try:
        await ws.send(encode(Hello(device_id=device, token=token)))
    except ConnectionClosed:  # refused at once: the refusal is still there to read
        pass
    return ws, await next_message(ws, timeout)


async def closed(ws: ClientConnection, timeout: float = 10) -> bool:
    """True once the gateway closed `ws` (within `timeout`)."""
    try:
        await asyncio.wait_for(ws.wait_closed(), timeout)
    except TimeoutError:
        return False
    return True
