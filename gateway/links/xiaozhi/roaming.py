"""A xiaozhi box on the WebSocket, whose session may come back through another cluster member.

On the WebSocket the box's connection is a `RoamingXiaozhiConnection`: in cluster mode its session
holds the device's lease like the own protocol's (gateway/devices/session_lease.py) and, when
another member takes it, is closed the same way: code 4409 `lease-lost: ...`, nothing before it.
The stock firmware reads no close code: any close ends its audio channel and it goes idle
(application.cc OnAudioChannelClosed); its next wake word or button press opens a new WebSocket to
its URL, through the balancer to whichever member, and says hello there (docs/XIAOZHI.md).
"""

from __future__ import annotations

from gateway.links.base import Roaming
from gateway.links.websocket import LEASE_LOST_CLOSE
from gateway.links.xiaozhi.connection import XiaozhiConnection


class RoamingXiaozhiConnection(XiaozhiConnection, Roaming):
    """A box on the WebSocket: behind a balancer it may come back through another cluster member."""

    async def lease_lost(self, text: str) -> None:
        """Close code 4409 `lease-lost: <text>`, as the own protocol's WebSocket (no frame before it)."""
        if self._box_tools is not None:
            await self._box_tools.close()
        await self._close(LEASE_LOST_CLOSE, f"lease-lost: {text}")
