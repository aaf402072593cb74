"""Console sessions: a random token in a cookie, a CSRF token for writes, an expiry.

A session also remembers (a digest of) the password hash it logged in with: when the password
changes (`gateway console password`, another process) every older session ends. The CSRF token
is derived from the session token (an HMAC), so nothing but the token's digest needs keeping.

With a `SessionStore` the sessions survive a restart of the gateway: a small SQLite file beside
the password file (`<password_file>-sessions.db`, mode 0600) keeps, per session, the SHA-256 of
its token (never the token itself: a copy of the file logs nobody in), its expiry and the
password digest. Logging out deletes the row; expired rows and rows of an older password are
deleted at the next login. The file is read once at start; writes run off the event loop.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import logging
import os
import secrets
import sqlite3
import time
from collections.abc import Callable
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

COOKIE = "gw_console"
MAX_SESSIONS = 64  # bounded: the oldest goes first


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def csrf_of(token: str) -> str:
    """The CSRF token of a session token (knowing it does not reveal the session token)."""
    mac = hmac.new(token.encode(), b"console csrf", hashlib.sha256).digest()
    return base64.urlsafe_b64encode(mac[:24]).decode()


@dataclass(frozen=True)
class Session:
    token: str
    csrf: str
    expires_at: float
    password: str  # digest of the stored password hash at login

    def csrf_ok(self, given: str | None) -> bool:
        return given is not None and hmac.compare_digest(given.encode(), self.csrf.encode())


@dataclass(frozen=True)
class _Kept:
    expires_at: float
    password: str  # digest of the password hash


class SessionStore:
    """The sessions' SQLite file: one row per session (token digest, expiry, password digest)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def _connect(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fresh = not self.path.exists()
        db = sqlite3.connect(self.path, timeout=5)
        if fresh:
            os.chmod(self.path, 0o600)
        db.execute("CREATE TABLE IF NOT EXISTS sessions (token_sha256 TEXT PRIMARY KEY, expires_at REAL NOT NULL,"
                   " password_sha256 TEXT NOT NULL)")
        return db

    def load(self, now: float) -> dict[str, _Kept]:
        """The unexpired sessions, oldest first (at start)."""
        with closing(self._connect()) as db:
            rows = db.execute("SELECT token_sha256, expires_at, password_sha256 FROM sessions WHERE expires_at > ?"
                              " ORDER BY expires_at", (now,)).fetchall()
        return {token: _Kept(expires_at, password) for token, expires_at, password in rows}

    def add(self, token_digest: str, kept: _Kept, now: float, keep: set[str]) -> None:
        """Keep one session; forget the expired ones, those of another password and those not in `keep`."""
        with closing(self._connect()) as db, db:
            db.execute("INSERT OR REPLACE INTO sessions VALUES (?, ?, ?)", (token_digest, kept.expires_at, kept.password))
            db.execute("DELETE FROM sessions WHERE expires_at <= ? OR password_sha256 != ?", (now, kept.password))
            for (old,) in db.execute("SELECT token_sha256 FROM sessions").fetchall():
                if old not in keep:
                    db.execute("DELETE FROM sessions WHERE token_sha256 = ?", (old,))

    def remove(self, token_digest: str) -> None:
        with closing(self._connect()) as db, db:
            db.execute("DELETE FROM sessions WHERE token_sha256 = ?", (token_digest,))


def store_beside(password_file: Path) -> SessionStore:
    """The sessions' file beside the console password file."""
    return SessionStore(password_file.with_name(password_file.name + "-sessions.db"))


class Sessions:
    def __init__(self, ttl_s: float, clock: Callable[[], float] = time.time, store: SessionStore | None = None) -> None:
        self.ttl_s = ttl_s
        self._clock = clock
        self._store = store
        self._by_digest: dict[str, _Kept] = {}
        if store is not None:
            try:
                self._by_digest = store.load(clock())
            except sqlite3.Error as exc:  # a broken file logs everyone out, nothing worse
                log.warning("console: sessions file %s unreadable (%s); everyone logs in again", store.path, exc)

    async def create(self, password_hash: str) -> Session:
        token = secrets.token_urlsafe(32)
        kept = _Kept(self._clock() + self.ttl_s, _digest(password_hash))
        digest = _digest(token)
        self._by_digest[digest] = kept
        while len(self._by_digest) > MAX_SESSIONS:
            del self._by_digest[next(iter(self._by_digest))]
        if self._store is not None:
            await self._write(self._store.add, digest, kept, self._clock(), set(self._by_digest))
        return Session(token, csrf_of(token), kept.expires_at, kept.password)

    def get(self, token: str | None, password_hash: str) -> Session | None:
        """The live session of `token`; None (and forgotten) when expired or the password changed."""
        if not token:
            return None
        digest = _digest(token)
        kept = self._by_digest.get(digest)
        if kept is None:
            return None
        if kept.expires_at <= self._clock() or not hmac.compare_digest(kept.password, _digest(password_hash)):
            del self._by_digest[digest]  # its row goes at the next login
            return None
        return Session(token, csrf_of(token), kept.expires_at, kept.password)

    async def drop(self, token: str) -> None:
        digest = _digest(token)
        self._by_digest.pop(digest, None)
        if self._store is not None:
            await self._write(self._store.remove, digest)

    async def _write(self, write: Callable[..., None], *args: object) -> None:
        assert self._store is not None
        try:
            await asyncio.to_thread(write, *args)
        except sqlite3.Error as exc:  # the session still works until the gateway restarts
            log.warning("console: sessions file %s not written (%s): this session ends at a restart",
                        self._store.path, exc)


def cookie_header(session: Session | None, secure: bool, ttl_s: float) -> str:
    """Set-Cookie for a session (or one that clears it)."""
    value, age = (session.token, int(ttl_s)) if session else ("", 0)
    return (f"{COOKIE}={value}; Path=/console; Max-Age={age}; HttpOnly; SameSite=Strict"
            + ("; Secure" if secure else ""))


def cookie_token(header: str | None) -> str | None:
    """The session token in a Cookie header."""
    for part in (header or "").split(";"):
        name, eq, value = part.strip().partition("=")
        if eq and name == COOKIE:
            return value
    return None
