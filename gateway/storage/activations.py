"""The xiaozhi activation codes on PostgreSQL: the ActivationStore (gateway/devices/activation.py)
several gateways share. A box that got its code from one gateway, approved from any gateway's
console, claims its token from whichever gateway its next OTA request reaches; the claim registers
it in the shared `devices` table in the same transaction that forgets the code (so a box is never
approved twice or registered without its code being consumed).

The rules are SQLite's (codes valid `ttl_s` from issue, an approval as long again, an expired row
deleted at the next offer, a code claimed only with the Client-Id it was given to). Offers take a transaction-level advisory lock, so two gateways asked
by one box at the same instant give it one code, and two boxes never share one.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable

from psycopg_pool import AsyncConnectionPool

from gateway.devices.activation import PendingActivation, claimable, client_hash_of, free_code, replaced
from gateway.storage.devices import register

_COLUMNS = "device_id, code, challenge, details, created_at, expires_at, approved_at, client_hash"
_OFFER_LOCK = 0x6163_7476  # pg_advisory_xact_lock key of the offers ("actv")


class PostgresActivations:
    def __init__(self, pool: AsyncConnectionPool, ttl_s: float, clock: Callable[[], float] = time.time) -> None:
        self._pool = pool
        self.ttl_s = ttl_s
        self._clock = clock

    def now(self) -> float:
        return self._clock()

    async def offer(self, device_id: str, details: str, client_id: str = "") -> PendingActivation:
        now = self._clock()
        client_hash = client_hash_of(client_id)
        async with self._pool.connection() as conn, conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(%s)", (_OFFER_LOCK,))
            await conn.execute("DELETE FROM activations WHERE expires_at <= %s", (now,))
            row = await (await conn.execute(f"SELECT {_COLUMNS} FROM activations WHERE device_id = %s",
                                            (device_id,))).fetchone()
            if row is not None and not replaced(PendingActivation(*row), client_hash):
                return PendingActivation(*row)
            await conn.execute("DELETE FROM activations WHERE device_id = %s", (device_id,))
            taken = {code for (code,) in await (await conn.execute("SELECT code FROM activations")).fetchall()}
            found = PendingActivation(device_id, free_code(taken), secrets.token_hex(16), details, now, now + self.ttl_s,
                                      None, client_hash)
            await conn.execute(f"INSERT INTO activations ({_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s, NULL, %s)",
                               (found.device_id, found.code, found.challenge, found.details, found.created_at,
                                found.expires_at, client_hash))
            return found

    async def state(self, device_id: str) -> PendingActivation | None:
        async with self._pool.connection() as conn:
            row = await (await conn.execute(f"SELECT {_COLUMNS} FROM activations WHERE device_id = %s AND expires_at > %s",
                                            (device_id, self._clock()))).fetchone()
        return PendingActivation(*row) if row else None

    async def claim(self, device_id: str, name: str, client_id: str = "") -> str | None:
        client_hash = client_hash_of(client_id)
        async with self._pool.connection() as conn, conn.transaction():
            row = await (await conn.execute(
                f"SELECT {_COLUMNS} FROM activations WHERE device_id = %s AND expires_at > %s FOR UPDATE",
                (device_id, self._clock()))).fetchone()
            if row is None or not claimable(PendingActivation(*row), client_hash):
                return None
            await conn.execute("DELETE FROM activations WHERE device_id = %s", (device_id,))
            token = await register(conn, device_id, name)
            await conn.execute("UPDATE devices SET client_hash = %s WHERE device_id = %s", (client_hash, device_id))
            return token

    async def approve(self, code: str) -> PendingActivation | None:
        now = self._clock()
        async with self._pool.connection() as conn:
            row = await (await conn.execute(
                "UPDATE activations SET approved_at = coalesce(approved_at, %s),"
                " expires_at = CASE WHEN approved_at IS NULL THEN %s ELSE expires_at END"
                f" WHERE code = %s AND expires_at > %s RETURNING {_COLUMNS}",
                (now, now + self.ttl_s, code, now))).fetchone()
        return PendingActivation(*row) if row else None

    async def reject(self, device_id: str) -> bool:
        async with self._pool.connection() as conn:
            done = await conn.execute("DELETE FROM activations WHERE device_id = %s", (device_id,))
            return done.rowcount == 1

    async def pending(self) -> list[PendingActivation]:
        async with self._pool.connection() as conn:
            rows = await (await conn.execute(f"SELECT {_COLUMNS} FROM activations WHERE expires_at > %s"
                                             " ORDER BY created_at", (self._clock(),))).fetchall()
        return [PendingActivation(*row) for row in rows]
