"""Devices and their tokens on PostgreSQL: the DeviceRegistry (gateway/devices/device_registry.py)
every gateway of a cluster checks Hellos and broker logins against. Same rows as SQLite's
(token SHA-256 and the mosquitto hash, never the token itself; a xiaozhi box's Client-Id SHA-256,
schema version 4), and the same rules for the boxes' self-enrolment (`enrol_box`)."""

from __future__ import annotations

import hmac
import secrets
import time
from datetime import UTC, datetime

import psycopg
from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from gateway.devices.auth import (BOUND, FULL, NOT_ADMITTED, REGISTERED, RENEWED, DeviceRecord, Enrolled,
                                  enrolment_outcome, hash_token)
from gateway.devices.broker_password import mosquitto_hash
from gateway.devices.reading_store import StorageFailed

_ENROL_LOCK = 0x656E_726C  # pg_advisory_xact_lock key of the boxes' self-enrolment ("enrl")


async def register(conn: AsyncConnection, device_id: str, name: str) -> str:
    """Register a device (or give it a new token) on `conn` (in the caller's transaction, if any);
    returns the new token (stored hashed). Also used by the activation codes' claim."""
    token = secrets.token_urlsafe(24)
    await conn.execute(
        "INSERT INTO devices (device_id, token_hash, name, created_at, broker_hash) VALUES (%s, %s, %s, %s, %s)"
        " ON CONFLICT (device_id) DO UPDATE SET token_hash = excluded.token_hash, name = excluded.name,"
        " broker_hash = excluded.broker_hash",
        (device_id, hash_token(token), name, time.time(), mosquitto_hash(token)))
    return token


def _record(row: tuple) -> DeviceRecord:
    device, name, created, seen = row
    return DeviceRecord(device, name, datetime.fromtimestamp(created, UTC),
                        datetime.fromtimestamp(seen, UTC) if seen else None)


class PostgresDeviceRegistry:
    def __init__(self, pool: AsyncConnectionPool) -> None:
        self._pool = pool

    async def check_token(self, device_id: str, token: str) -> bool | None:
        try:
            async with self._pool.connection() as conn:
                row = await (await conn.execute("SELECT token_hash FROM devices WHERE device_id = %s",
                                                (device_id,))).fetchone()
                if row is None:
                    return None
                ok = hmac.compare_digest(row[0], hash_token(token))
                if ok:
                    await conn.execute("UPDATE devices SET last_seen = %s WHERE device_id = %s",
                                       (time.time(), device_id))
                return ok
        except PoolTimeout as exc:  # the Hello is refused storage-failed, as with SQLite's errors
            raise StorageFailed(f"PostgreSQL unreachable: {exc}") from exc
        except psycopg.Error as exc:
            raise StorageFailed(f"PostgreSQL error: {exc}") from exc

    async def add_device(self, device_id: str, name: str = "") -> str:
        async with self._pool.connection() as conn:
            return await register(conn, device_id, name)

    async def enrol_box(self, device_id: str, name: str, client_id: str, may_register: bool,
                        max_enrolled: int) -> Enrolled:
        """SQLite's rules (gateway/devices/auth.py enrol_box) for every gateway of the database:
        one enrolment at a time (an advisory lock), so the cap holds and a box asking two
        gateways at once is created once."""
        client_hash = hash_token(client_id)
        async with self._pool.connection() as conn, conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(%s)", (_ENROL_LOCK,))
            row = await (await conn.execute("SELECT client_hash FROM devices WHERE device_id = %s",
                                            (device_id,))).fetchone()
            outcome = enrolment_outcome(row, client_hash)
            if outcome == REGISTERED and not may_register:
                return Enrolled(NOT_ADMITTED)
            if outcome == REGISTERED:
                (count,) = await (await conn.execute("SELECT count(*) FROM devices WHERE open_enrolled = 1")).fetchone()
                if count >= max_enrolled:
                    return Enrolled(FULL)
            if outcome not in (REGISTERED, RENEWED, BOUND):
                return Enrolled(outcome)
            token = secrets.token_urlsafe(24)
            await conn.execute(
                "INSERT INTO devices (device_id, token_hash, name, created_at, broker_hash, client_hash, open_enrolled)"
                " VALUES (%s, %s, %s, %s, %s, %s, 1) ON CONFLICT (device_id) DO UPDATE SET"
                " token_hash = excluded.token_hash, broker_hash = excluded.broker_hash, client_hash = excluded.client_hash",
                (device_id, hash_token(token), name, time.time(), mosquitto_hash(token), client_hash))
            return Enrolled(outcome, token)

    async def get_device(self, device_id: str) -> DeviceRecord | None:
        async with self._pool.connection() as conn:
            row = await (await conn.execute("SELECT device_id, name, created_at, last_seen FROM devices"
                                            " WHERE device_id = %s", (device_id,))).fetchone()
        return None if row is None else _record(row)

    async def list_devices(self) -> list[DeviceRecord]:
        async with self._pool.connection() as conn:
            rows = await (await conn.execute("SELECT device_id, name, created_at, last_seen FROM devices"
                                             " ORDER BY device_id")).fetchall()
        return [_record(row) for row in rows]

    async def remove_device(self, device_id: str) -> bool:
        async with self._pool.connection() as conn:
            done = await conn.execute("DELETE FROM devices WHERE device_id = %s", (device_id,))
            return done.rowcount == 1

    async def rename_device(self, device_id: str, name: str) -> bool:
        async with self._pool.connection() as conn:
            done = await conn.execute("UPDATE devices SET name = %s WHERE device_id = %s", (name, device_id))
            return done.rowcount == 1

    async def broker_logins(self) -> list[tuple[str, str | None]]:
        async with self._pool.connection() as conn:
            return await (await conn.execute("SELECT device_id, broker_hash FROM devices ORDER BY device_id")).fetchall()
