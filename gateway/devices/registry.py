"""Which devices are connected right now, by device id (newest connection wins)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from firmware_protocol import Capability, Hello
from gateway.devices.sayer import Sayer
from gateway.links.base import DeviceConnection

log = logging.getLogger(__name__)


class SessionRegistry:
    def __init__(self) -> None:
        self._conns: dict[str, DeviceConnection] = {}
        self._speakers: dict[str, Sayer | None] = {}  # device id -> its conversation (say / alerts)
        self._caps: dict[str, int] = {}  # device id -> Hello.capabilities
        self._hellos: dict[str, tuple[Hello, float]] = {}  # device id -> its Hello and when (the console shows them)
        self._changed = asyncio.Event()  # set (and replaced) whenever a device comes or goes

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def wait_until(self, condition: Callable[["SessionRegistry"], bool], timeout: float) -> None:
        """Wait until `condition(registry)` holds (checked at each connect / disconnect);
        raises TimeoutError after `timeout` seconds."""
        async with asyncio.timeout(timeout):
            while not condition(self):
                await self._changed.wait()

    @asynccontextmanager
    async def register(self, device_id: str, conn: DeviceConnection, speaker: Sayer | None = None,
                       capabilities: int = Capability.AUDIO_IN | Capability.AUDIO_OUT,
                       hello: Hello | None = None) -> AsyncIterator[None]:
        """Registered for the body's duration. A connection it replaces is closed alongside (a dead
        peer's close may take the link's close timeout); that close is awaited at the end."""
        old = self._conns.get(device_id)
        closing: asyncio.Task[None] | None = None
        if old is not None and old is not conn:
            log.info("%s: device %s reconnected from %s; closing the old connection", old.peer, device_id, conn.peer)
            closing = asyncio.create_task(old.close("replaced by a newer connection"), name=f"close {old.peer}")
        self._conns[device_id] = conn
        self._speakers[device_id] = speaker
        self._caps[device_id] = capabilities
        if hello is not None:
            self._hellos[device_id] = (hello, time.time())
        else:
            self._hellos.pop(device_id, None)
        self._notify()
        try:
            yield
        finally:
            if self._conns.get(device_id) is conn:
                del self._conns[device_id]
                self._speakers.pop(device_id, None)
                self._caps.pop(device_id, None)
                self._hellos.pop(device_id, None)
                self._notify()
            if closing is not None:
                await _closed(closing)

    def connected(self) -> list[str]:
        return sorted(self._conns)

    def get(self, device_id: str) -> DeviceConnection | None:
        return self._conns.get(device_id)

    def can_speak(self, device_id: str) -> bool:
        """Connected and announced AUDIO_OUT in its Hello (it can play what the gateway says)."""
        return bool(self._caps.get(device_id, 0) & Capability.AUDIO_OUT)

    def hello(self, device_id: str) -> tuple[Hello, float] | None:
        """The connected device's Hello (audio formats, firmware) and when it connected (unix s)."""
        return self._hellos.get(device_id)

    def speaker(self, device_id: str) -> Sayer | None:
        """The device's conversation (it can `say(text)`), or None."""
        return self._speakers.get(device_id)


async def _closed(closing: asyncio.Task[None]) -> None:
    """Wait for a replaced connection's close; its failure is only logged (the peer is gone anyway)."""
    try:
        await closing
    except Exception as exc:  # boundary: closing a dead peer's socket may fail in many ways
        log.info("%s: closing the replaced connection failed (%s)", closing.get_name(), exc)
