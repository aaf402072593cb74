"""Device identity: the registry of known devices (SQLite here; on PostgreSQL:
gateway/storage/devices.py) and the check of a Hello's token.

Each registered device has a random token; only its SHA-256 is stored (tokens are 192-bit
random, so a plain hash is enough), compared in constant time. With open enrolment (a trusted
LAN) unknown devices are let in with a warning; a registered device with a wrong token is always
refused. A token that cannot be checked (the database locked past its busy timeout, the disk full)
refuses the Hello with `storage-failed`: the device says Hello again later.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
import sqlite3
import time
from dataclasses import dataclass
from datetime import UTC, datetime

from firmware_protocol import Hello
from gateway.devices.broker_password import mosquitto_hash
from gateway.devices.database import Database
from gateway.devices.device_registry import DeviceRegistry
from gateway.devices.reading_store import StorageFailed

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DeviceRecord:
    device_id: str
    name: str
    created_at: datetime
    last_seen: datetime | None


def hash_token(token: str) -> str:
    """What is stored of a token: its SHA-256, hex."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def add_device(conn: sqlite3.Connection, device_id: str, name: str = "") -> str:
    """Register a device (or give it a new token); returns the new token (shown once). A box's
    Client-Id binding (`enrol_box`) is kept: the owner rotating a token does not unbind it."""
    token = secrets.token_urlsafe(24)
    conn.execute(
        "INSERT INTO devices (device_id, token_hash, name, created_at, broker_hash) VALUES (?, ?, ?, ?, ?)"
        " ON CONFLICT (device_id) DO UPDATE SET token_hash = excluded.token_hash, name = excluded.name,"
        " broker_hash = excluded.broker_hash",
        (device_id, hash_token(token), name, time.time(), mosquitto_hash(token)),
    )
    return token


# What a box's OTA request got (`Enrolled.outcome`): a token with the first three, none with the others
REGISTERED = "registered"  # a new device, bound to its Client-Id
RENEWED = "renewed"  # a registered device with the same Client-Id: a new token
BOUND = "bound"  # a device registered without a Client-Id binding: bound now (trust on first use)
OTHER_CLIENT = "other-client"  # a registered device bound to another Client-Id: refused
FULL = "enrolment-full"  # a new device, but `max_enrolled` devices were enrolled this way already
NOT_ADMITTED = "not-admitted"  # a new device the caller did not admit (its address's rate limit)


@dataclass(frozen=True)
class Enrolled:
    outcome: str
    token: str | None = None  # the new token (stored hashed), with REGISTERED, RENEWED and BOUND


def enrol_box(conn: sqlite3.Connection, device_id: str, name: str, client_id: str, may_register: bool,
              max_enrolled: int) -> Enrolled:
    """A self-enrolling box's request (see the module's docstring), in one write transaction (the
    CLI may write meanwhile). `name` is stored only when the device is created."""
    client_hash = hash_token(client_id)
    conn.execute("BEGIN IMMEDIATE")
    try:
        row = conn.execute("SELECT client_hash FROM devices WHERE device_id = ?", (device_id,)).fetchone()
        outcome = enrolment_outcome(row, client_hash)
        if outcome == REGISTERED and not may_register:
            outcome = NOT_ADMITTED
        elif outcome == REGISTERED and open_enrolled(conn) >= max_enrolled:
            outcome = FULL
        token = None
        if outcome in (REGISTERED, RENEWED, BOUND):
            token = secrets.token_urlsafe(24)
            conn.execute(
                "INSERT INTO devices (device_id, token_hash, name, created_at, broker_hash, client_hash, open_enrolled)"
                " VALUES (?, ?, ?, ?, ?, ?, 1) ON CONFLICT (device_id) DO UPDATE SET token_hash = excluded.token_hash,"
                " broker_hash = excluded.broker_hash, client_hash = excluded.client_hash",
                (device_id, hash_token(token), name, time.time(), mosquitto_hash(token), client_hash))
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return Enrolled(outcome, token)


def enrolment_outcome(row: tuple[str | None] | None, client_hash: str) -> str:
    """REGISTERED (no such device yet), RENEWED, BOUND or OTHER_CLIENT for the device's row
    (its stored Client-Id hash) and the request's Client-Id hash. Shared by both registries."""
    if row is None:
        return REGISTERED
    if row[0] is None:
        return BOUND
    return RENEWED if hmac.compare_digest(row[0], client_hash) else OTHER_CLIENT


def open_enrolled(conn: sqlite3.Connection) -> int:
    """How many registered devices were created by their own OTA request (open enrolment)."""
    return conn.execute("SELECT count(*) FROM devices WHERE open_enrolled = 1").fetchone()[0]


def broker_logins(conn: sqlite3.Connection) -> list[tuple[str, str | None]]:
    """(device id, mosquitto password hash or None for a token made before it was stored), by id."""
    return list(conn.execute("SELECT device_id, broker_hash FROM devices ORDER BY device_id"))


def remove_device(conn: sqlite3.Connection, device_id: str) -> bool:
    return conn.execute("DELETE FROM devices WHERE device_id = ?", (device_id,)).rowcount == 1


def rename_device(conn: sqlite3.Connection, device_id: str, name: str) -> bool:
    """Change the note for people; False when no such device is registered."""
    return conn.execute("UPDATE devices SET name = ? WHERE device_id = ?", (name, device_id)).rowcount == 1


def _record(row: tuple) -> DeviceRecord:
    device_id, name, created, seen = row
    return DeviceRecord(device_id, name, datetime.fromtimestamp(created, UTC),
                        datetime.fromtimestamp(seen, UTC) if seen else None)


def list_devices(conn: sqlite3.Connection) -> list[DeviceRecord]:
    rows = conn.execute("SELECT device_id, name, created_at, last_seen FROM devices ORDER BY device_id")
    return [_record(row) for row in rows]


def get_device(conn: sqlite3.Connection, device_id: str) -> DeviceRecord | None:
    row = conn.execute(
        "SELECT device_id, name, created_at, last_seen FROM devices WHERE device_id = ?", (device_id,)
    ).fetchone()
    return _record(row) if row else None


def check_token(conn: sqlite3.Connection, device_id: str, token: str) -> bool | None:
    """True/False for a registered device's token (and marks it seen), None for an unknown device."""
    row = conn.execute("SELECT token_hash FROM devices WHERE device_id = ?", (device_id,)).fetchone()
    if row is None:
        return None
    ok = hmac.compare_digest(row[0], hash_token(token))
    if ok:
        conn.execute("UPDATE devices SET last_seen = ? WHERE device_id = ?", (time.time(), device_id))
    return ok


class AuthRefused(Exception):
    """Hello refused; `str(exc)` is the reason and `code` the error code (logged and sent to the device)."""

    def __init__(self, reason: str, code: str = "auth-failed") -> None:
        super().__init__(reason)
        self.code = code


class SqliteDeviceRegistry:
    """The DeviceRegistry on the gateway's SQLite database (its one writer thread)."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def check_token(self, device_id: str, token: str) -> bool | None:
        try:
            return await self._db.run(check_token, device_id, token)
        except sqlite3.Error as exc:  # 'database is locked' past busy_timeout, disk full, I/O error
            raise StorageFailed(f"database error: {exc}") from exc

    async def add_device(self, device_id: str, name: str = "") -> str:
        return await self._db.run(add_device, device_id, name)

    async def enrol_box(self, device_id: str, name: str, client_id: str, may_register: bool,
                        max_enrolled: int) -> Enrolled:
        return await self._db.run(enrol_box, device_id, name, client_id, may_register, max_enrolled)

    async def get_device(self, device_id: str) -> DeviceRecord | None:
        return await self._db.run(get_device, device_id)

    async def list_devices(self) -> list[DeviceRecord]:
        return await self._db.run(list_devices)

    async def remove_device(self, device_id: str) -> bool:
        return await self._db.run(remove_device, device_id)

    async def rename_device(self, device_id: str, name: str) -> bool:
        return await self._db.run(rename_device, device_id, name)

    async def broker_logins(self) -> list[tuple[str, str | None]]:
        return await self._db.run(broker_logins)


class Authenticator:
    def __init__(self, registry: DeviceRegistry, open_enrolment: bool) -> None:
        self._registry = registry
        self.open_enrolment = open_enrolment

    async def check(self, hello: Hello, peer: str) -> None:
        """Return when the device may connect; raise AuthRefused otherwise (its code
        `storage-failed` when the registry could not check the token)."""
        try:
            known = await self._registry.check_token(hello.device_id, hello.token)
        except StorageFailed as exc:
            raise AuthRefused(f"the token of {hello.device_id} could not be checked ({exc}); say Hello again later",
                              code="storage-failed") from exc
        if known is True:
            return
        if known is False:
            raise AuthRefused(f"wrong token for device {hello.device_id}")
        if not self.open_enrolment:
            raise AuthRefused(
                f"unknown device {hello.device_id} (register it with `gateway devices add {hello.device_id}`)"
            )
        log.warning("%s: unregistered device %s let in because devices.open_enrolment is on "
                    "(turn it off outside a trusted LAN)", peer, hello.device_id)

    async def issue_token(self, device_id: str, name: str, client_id: str, may_register: bool = True,
                          max_enrolled: int = 256) -> Enrolled | None:
        """For a device that bootstraps itself (a xiaozhi box's OTA request, `client_id` its
        Client-Id): with open enrolment, `enrol_box` (a new token when it is new and
        `may_register` and fewer than `max_enrolled` were enrolled so, or when its Client-Id is
        the one it is bound to); with enrolment closed, None."""
        if not self.open_enrolment:
            return None
        return await self._registry.enrol_box(device_id, name, client_id, may_register, max_enrolled)

    async def is_registered(self, device_id: str) -> bool:
        return await self._registry.get_device(device_id) is not None

    async def broker_logins(self) -> list[tuple[str, str | None]]:
        return await self._registry.broker_logins()

    async def check_credentials(self, username: str | None, password: str | None) -> bool:
        """For a broker login (username = device id, password = token): may this client connect?"""
        if username is None:
            return self.open_enrolment
        known = await self._registry.check_token(username, password or "")
        return known if known is not None else self.open_enrolment
