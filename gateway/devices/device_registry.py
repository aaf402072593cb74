"""The registered devices and their tokens, as the Authenticator (auth.py) reads and writes them:
the interface both stores implement (SQLite: `SqliteDeviceRegistry` in auth.py; PostgreSQL,
shared by several gateways: `PostgresDeviceRegistry` in gateway/storage/devices.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from gateway.devices.auth import DeviceRecord, Enrolled


class DeviceRegistry(Protocol):
    async def check_token(self, device_id: str, token: str) -> bool | None:
        """True/False for a registered device's token (and marks it seen), None for an unknown device."""
        ...

    async def add_device(self, device_id: str, name: str = "") -> str:
        """Register a device (or give it a new token); returns the new token (stored hashed)."""
        ...

    async def enrol_box(self, device_id: str, name: str, client_id: str, may_register: bool,
                        max_enrolled: int) -> Enrolled:
        """A self-enrolling box's request (a xiaozhi box's OTA): registered and bound to its
        Client-Id when new (if `may_register` and fewer than `max_enrolled` devices were enrolled
        so), a new token when the Client-Id is the one it is bound to (or it is not bound yet:
        bound now), refused when it is bound to another (gateway/devices/auth.py)."""
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
