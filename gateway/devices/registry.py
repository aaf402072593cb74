"""Which devices are connected right now, by device id (newest connection wins)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from gateway.links.base import DeviceConnection

log = logging.getLogger(__name__)


class SessionRegistry:
    def __init__(self) -> None:
        self._conns: dict[str, DeviceConnection] = {}
        self._speakers: dict[str, Any] = {}  # device id -> its Conversation (for say / alerts)

    @contextmanager
    def register(self, device_id: str, conn: DeviceConnection, speaker: Any = None) -> Iterator[None]:
        old = self._conns.get(device_id)
        if old is not None and old is not conn:
            log.info("%s: device %s reconnected from %s; closing the old connection", old.peer, device_id, conn.peer)
            asyncio.get_running_loop().create_task(old.close("replaced by a newer connection"))
        self._conns[device_id] = conn
        self._speakers[device_id] = speaker
        try:
            yield
        finally:
            if self._conns.get(device_id) is conn:
                del self._conns[device_id]
                self._speakers.pop(device_id, None)

    def connected(self) -> list[str]:
        return sorted(self._conns)

    def get(self, device_id: str) -> DeviceConnection | None:
        return self._conns.get(device_id)

    def speaker(self, device_id: str) -> Any:
        """The device's conversation (it has `async say(text)`), or None."""
        return self._speakers.get(device_id)
