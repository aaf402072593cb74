"""The device side of the MCP tools, over the gateway's session registry (no MCP import here)."""

from __future__ import annotations

from firmware_protocol import Action
from gateway.devices.registry import SessionRegistry


class DeviceUnavailable(ValueError):
    """The device is not connected (the message lists the ones that are)."""


class GatewayDevices:
    def __init__(self, registry: SessionRegistry) -> None:
        self.registry = registry

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
