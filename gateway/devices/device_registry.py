"""The registered devices and their tokens, as the Authenticator (auth.py) reads and writes them:
the interface both stores implement (SQLite: `SqliteDeviceRegistry` in auth.py; PostgreSQL,
shared by several gateways: `PostgresDeviceRegistry` in gateway/storage/devices.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from gateway.devices.auth import DeviceRecord


class DeviceRegistry(Protocol):
    async def check_token(self, device_id: str, token: str) -> bool | None:
        """True/False for a registered device's token (and marks it seen), None for an unknown device."""
        ...

    async def add_device(self, device_id: str, name: str = "") -> str:
        """Register a device (or give it a new token); returns the new token (stored hashed)."""
        ...

    async def get_device(self, device_id: str) -> DeviceRecord | None: ...

    async def list_devices(self) -> list[DeviceRecord]:
        """Every registered device, by id."""
        ...

    async def remove_device(self, device_id: str) -> bool:
        """Unregister it (its token no longer works); False when no such device is registered."""
        ...

    async def rename_device(self, device_id: str, name: str) -> bool:
        """Change its note for people; False when no such device is registered."""
        ...

    async def broker_logins(self) -> list[tuple[str, str | None]]:
        """(device id, mosquitto password hash or None), by id."""
        ...
