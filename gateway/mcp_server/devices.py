"""The device side of the MCP tools, over the gateway's session registry (no MCP import here)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from firmware_protocol import Action
from gateway.devices.device_tools import DeviceToolError, DeviceTools
from gateway.devices.registry import SessionRegistry

if TYPE_CHECKING:
    from gateway.cluster.node import ClusterNode


class DeviceUnavailable(ValueError):
    """The device is not connected (the message lists the ones that are)."""


class GatewayDevices:
    def __init__(self, registry: SessionRegistry, tools: DeviceTools | None = None,
                 cluster: ClusterNode | None = None) -> None:
        self.registry = registry
        self.tools = tools if tools is not None else DeviceTools()
        self.cluster = cluster  # cluster mode: the devices every member serves, heard on the broker

    def served(self) -> list[dict[str, Any]]:
        """Every device the gateway (in cluster mode: the cluster) knows: online or not, and the
        member serving it (None: nobody right now; on a single box the gateway itself)."""
        if self.cluster is None:
            return [{"device_id": d, "online": True, "gateway": None, "epoch": None, "since": None}
                    for d in self.connected()]
        return [entry.as_dict() for entry in self.cluster.devices()]

    def connected(self) -> list[str]:
        return self.registry.connected()

    def can_speak(self, device_id: str) -> bool:
        """Connected and announced audio output (Capability.AUDIO_OUT) in its Hello."""
        return self.registry.can_speak(device_id)

    def _missing(self, device_id: str) -> DeviceUnavailable:
        return DeviceUnavailable(f"device {device_id!r} is not connected (connected: {', '.join(self.connected()) or 'none'})")

    async def say(self, device_id: str, text: str) -> None:
        if not text.strip():
            raise ValueError("text must not be empty")
        speaker = self.registry.speaker(device_id)
        if speaker is None:
            raise self._missing(device_id)
        if not self.registry.can_speak(device_id):
            raise DeviceUnavailable(f"device {device_id!r} cannot speak: it did not announce audio output "
                                    "(AUDIO_OUT) in its Hello")
        await speaker.say(text)

    async def perform_action(self, device_id: str, code: str, behavior: str = "", affect: str = "",
                             intensity: int = 50) -> None:
        conn = self.registry.get(device_id)
        if conn is None:
            raise self._missing(device_id)
        await conn.send(Action(stream_id=0, code=code, behavior=behavior, affect=affect, intensity=intensity, priority=50))

    def list_device_tools(self, device_id: str) -> list[dict[str, Any]]:
        """The device's own tools (name, description, inputSchema); raises if it offers none now."""
        if not self.tools.listed(device_id):
            if self.registry.get(device_id) is None:
                raise self._missing(device_id)
            raise DeviceUnavailable(f"device {device_id!r} offers no tools (its link has no MCP, or it listed none)")
        return [t.as_dict() for t in self.tools.listed(device_id)]

    async def call_device_tool(self, device_id: str, name: str, arguments: dict[str, Any]) -> str:
        """The tool's text result; the device's error or a timeout raises with its reason."""
        try:
            return await self.tools.call(device_id, name, arguments)
        except DeviceToolError as exc:
            raise DeviceUnavailable(f"{exc.code}: {exc.text}") from None
