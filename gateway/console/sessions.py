"""Console sessions: a random token in a cookie, a CSRF token for writes, an expiry.

Kept in the gateway's memory (a restart logs everyone out). A session also remembers the
password hash it logged in with: when the password changes (`gateway console password`, another
process) every older session ends.
"""

from __future__ import annotations

import hmac
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass

COOKIE = "gw_console"
MAX_SESSIONS = 64  # bounded: the oldest goes first


@dataclass(frozen=True)
class Session:
    token: str
    csrf: str
    expires_at: float
    password: str  # the stored password hash at login

    def csrf_ok(self, given: str | None) -> bool:
        return given is not None and hmac.compare_digest(given.encode(), self.csrf.encode())


class Sessions:
    def __init__(self, ttl_s: float, clock: Callable[[], float] = time.time) -> None:
        self.ttl_s = ttl_s
        self._clock = clock
        self._by_token: dict[str, Session] = {}

    def create(self, password_hash: str) -> Session:
        session = Session(secrets.token_urlsafe(32), secrets.token_urlsafe(24), self._clock() + self.ttl_s, password_hash)
        self._by_token[session.token] = session
        while len(self._by_token) > MAX_SESSIONS:
            del self._by_token[next(iter(self._by_token))]
        return session

    def get(self, token: str | None, password_hash: str) -> Session | None:
        """The live session of `token`; None (and forgotten) when expired or the password changed."""
        if not token:
            return None
        session = self._by_token.get(token)
        if session is None:
            return None
        if session.expires_at <= self._clock() or session.password != password_hash:
            del self._by_token[token]
            return None
        return session

    def drop(self, token: str) -> None:
        self._by_token.pop(token, None)


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
