"""Onboarding by activation code: an unknown box waits with a 6-digit code until the owner approves it.

With `devices.open_enrolment` off, a xiaozhi box the registry does not know gets an `activation`
section in its OTA answer (gateway/links/xiaozhi/ota.py): a code it shows and speaks, and a
challenge. The owner types `gateway devices activate CODE` (another process: the database is the
meeting point, WAL lets both write); the box's `POST <ota>/activate` is answered 202 until then,
200 after; its next OTA request claims the approval, which registers it with a fresh token
(stored hashed like every token: `add_device`) handed over in that answer, once.

A code stays valid `ttl_s` seconds (`xiaozhi.activation_ttl_s`) from when it was issued, and an
approval as long again from when it was given; an expired row is deleted at the next offer, so the
box's next OTA request gets a new code. While a code is valid the box keeps getting the same one
(it asks again after its ten /activate attempts).

A code belongs to the Client-Id it was given to (the UUID the box keeps; its SHA-256 is stored):
only a request with that Client-Id claims the approved token, and the box is registered bound to
it (gateway/devices/auth.py enrol_box). So someone who knows the box's MAC cannot take the token
its owner approved for the box. Another Client-Id asking while a code waits unapproved gets a new
code that replaces it (the box then shows its own again at its next request); an approved code
is kept for its Client-Id. Pure functions on a connection (the CLI's) and
an async `Activations` over the gateway's `Database`: the `ActivationStore` the xiaozhi OTA
endpoint and the console use; on PostgreSQL, shared by several gateways, `PostgresActivations`
(gateway/storage/activations.py), so a box activated through one gateway is activated for all.
"""

from __future__ import annotations

import hmac
import secrets
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from gateway.devices.auth import add_device, hash_token
from gateway.devices.database import Database

CODE_DIGITS = 6


@dataclass(frozen=True)
class PendingActivation:
    device_id: str
    code: str
    challenge: str
    details: str  # MAC, Client-Id, board, firmware: what `gateway devices pending` shows
    created_at: float
    expires_at: float
    approved_at: float | None = None
    client_hash: str | None = None  # SHA-256 of the Client-Id the code was given to (None: none sent)

    @property
    def approved(self) -> bool:
        return self.approved_at is not None


_COLUMNS = "device_id, code, challenge, details, created_at, expires_at, approved_at, client_hash"


def _row(row: tuple | None) -> PendingActivation | None:
    return PendingActivation(*row) if row else None


def valid_code(code: str) -> bool:
    return len(code) == CODE_DIGITS and code.isascii() and code.isdigit()


def _expire(conn: sqlite3.Connection, now: float) -> None:
    conn.execute("DELETE FROM activations WHERE expires_at <= ?", (now,))


def client_hash_of(client_id: str) -> str | None:
    """What is stored of a request's Client-Id (None when it sent none)."""
    return hash_token(client_id) if client_id else None


def replaced(found: PendingActivation | None, client_hash: str | None) -> bool:
    """Does another Client-Id's request replace this waiting code (see the module's docstring)?"""
    return found is not None and not found.approved and found.client_hash != client_hash


def claimable(found: PendingActivation | None, client_hash: str | None) -> bool:
    """May a request with this Client-Id claim this code's token? (a code of a request without a
    Client-Id, or from before codes kept one, by any)"""
    return (found is not None and found.approved
            and (found.client_hash is None or (client_hash is not None and hmac.compare_digest(found.client_hash, client_hash))))


def offer(conn: sqlite3.Connection, device_id: str, details: str, ttl_s: float, now: float,
          client_id: str = "") -> PendingActivation:
    """The box's current code (the same while valid, for the same Client-Id), or a new one."""
    client_hash = client_hash_of(client_id)
    conn.execute("BEGIN IMMEDIATE")
    try:
        _expire(conn, now)
        found = _row(conn.execute(f"SELECT {_COLUMNS} FROM activations WHERE device_id = ?", (device_id,)).fetchone())
        if replaced(found, client_hash):
            conn.execute("DELETE FROM activations WHERE device_id = ?", (device_id,))
            found = None
        if found is None:
            taken = {c for (c,) in conn.execute("SELECT code FROM activations")}
            found = PendingActivation(device_id, free_code(taken), secrets.token_hex(16), details, now, now + ttl_s,
                                      None, client_hash)
            conn.execute(f"INSERT INTO activations ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                         (found.device_id, found.code, found.challenge, found.details, found.created_at,
                          found.expires_at, None, client_hash))
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return found


def free_code(taken: set[str]) -> str:
    """A random code not in use (a million codes, a handful of boxes waiting at once)."""
    for _ in range(64):
        code = f"{secrets.randbelow(10**CODE_DIGITS):0{CODE_DIGITS}d}"
        if code not in taken:
            return code
    raise RuntimeError("no free activation code found")


def approve(conn: sqlite3.Connection, code: str, ttl_s: float, now: float) -> PendingActivation | None:
    """Approve the box waiting with `code`; None when no valid code matches (wrong or expired)."""
    found = _row(conn.execute(f"SELECT {_COLUMNS} FROM activations WHERE code = ? AND expires_at > ?",
                              (code, now)).fetchone())
    if found is None:
        return None
    if found.approved_at is None:
        conn.execute("UPDATE activations SET approved_at = ?, expires_at = ? WHERE device_id = ?",
                     (now, now + ttl_s, found.device_id))
    return get(conn, found.device_id, now)


def reject(conn: sqlite3.Connection, device_id: str) -> bool:
    """Forget a waiting box's code (it gets a new one at its next OTA request, to be approved or
    rejected again); False when none is waiting."""
    return conn.execute("DELETE FROM activations WHERE device_id = ?", (device_id,)).rowcount == 1


def get(conn: sqlite3.Connection, device_id: str, now: float) -> PendingActivation | None:
    return _row(conn.execute(f"SELECT {_COLUMNS} FROM activations WHERE device_id = ? AND expires_at > ?",
                             (device_id, now)).fetchone())


def list_pending(conn: sqlite3.Connection, now: float) -> list[PendingActivation]:
    rows = conn.execute(f"SELECT {_COLUMNS} FROM activations WHERE expires_at > ? ORDER BY created_at", (now,))
    return [PendingActivation(*row) for row in rows]


def claim(conn: sqlite3.Connection, device_id: str, name: str, now: float, client_id: str = "") -> str | None:
    """An approved box asking with the Client-Id its code was given to: register it (a new token,
    stored hashed; bound to that Client-Id) and forget the activation. Returns the token to hand
    over, or None when the box is not approved (or its approval expired, or another Client-Id asks)."""
    client_hash = client_hash_of(client_id)
    conn.execute("BEGIN IMMEDIATE")
    try:
        found = get(conn, device_id, now)
        token = None
        if claimable(found, client_hash):
            token = add_device(conn, device_id, name)
            conn.execute("UPDATE devices SET client_hash = ? WHERE device_id = ?", (client_hash, device_id))
            conn.execute("DELETE FROM activations WHERE device_id = ?", (device_id,))
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return token


class ActivationStore(Protocol):
    """The activation codes as the gateway's links (OTA) and its console use them."""

    ttl_s: float

    async def offer(self, device_id: str, details: str, client_id: str = "") -> PendingActivation:
        """The box's current code (the same while valid, for the same Client-Id), or a new one."""
        ...

    async def state(self, device_id: str) -> PendingActivation | None: ...

    async def claim(self, device_id: str, name: str, client_id: str = "") -> str | None:
        """An approved box asking with its code's Client-Id: registered (its new token returned
        once, bound to that Client-Id) and its code forgotten."""
        ...

    async def approve(self, code: str) -> PendingActivation | None:
        """The box waiting with `code` approved; None when no valid code matches."""
        ...

    async def reject(self, device_id: str) -> bool: ...

    async def pending(self) -> list[PendingActivation]:
        """The valid codes, oldest first."""
        ...

    def now(self) -> float: ...


class Activations:
    """The ActivationStore on the gateway's SQLite database (its database thread)."""

    def __init__(self, db: Database, ttl_s: float, clock: Callable[[], float] = time.time) -> None:
        self._db = db
        self.ttl_s = ttl_s
        self._clock = clock

    async def offer(self, device_id: str, details: str, client_id: str = "") -> PendingActivation:
        return await self._db.run(offer, device_id, details, self.ttl_s, self._clock(), client_id)

    async def state(self, device_id: str) -> PendingActivation | None:
        return await self._db.run(get, device_id, self._clock())

    async def claim(self, device_id: str, name: str, client_id: str = "") -> str | None:
        return await self._db.run(claim, device_id, name, self._clock(), client_id)

    async def approve(self, code: str) -> PendingActivation | None:
        return await self._db.run(approve, code, self.ttl_s, self._clock())

    async def reject(self, device_id: str) -> bool:
        return await self._db.run(reject, device_id)

    async def pending(self) -> list[PendingActivation]:
        return await self._db.run(list_pending, self._clock())

    def now(self) -> float:
        return self._clock()
