"""The console's admin password: scrypt-hashed with a random salt in one file of the data folder.

Format of the file (one line, mode 0600): `scrypt$<n>$<r>$<p>$<salt b64>$<hash b64>`. Set with
`gateway console password`; `ensure` makes a random one when the file is missing (printed once
by the caller). Verifying costs ~50 ms of CPU on purpose: callers run it off the event loop.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets
from pathlib import Path

N, R, P = 2**14, 8, 1  # scrypt cost: 16 MB, ~50 ms on a small board's core
MIN_LENGTH = 8


class PasswordError(ValueError):
    """A password that cannot be used (too short) or a broken password file."""


def _scrypt(password: str, salt: bytes, n: int, r: int, p: int) -> bytes:
    return hashlib.scrypt(password.encode("utf-8"), salt=salt, n=n, r=r, p=p, maxmem=64 * 1024 * 1024, dklen=32)


def hash_password(password: str) -> str:
    if len(password) < MIN_LENGTH:
        raise PasswordError(f"the password must have at least {MIN_LENGTH} characters")
    salt = secrets.token_bytes(16)
    digest = _scrypt(password, salt, N, R, P)
    b64 = base64.b64encode
    return f"scrypt${N}${R}${P}${b64(salt).decode()}${b64(digest).decode()}"


def matches(stored: str, password: str) -> bool:
    """Whether `password` is the one `stored` (a hash_password line) was made from; constant time."""
    try:
        scheme, n, r, p, salt, digest = stored.strip().split("$")
        if scheme != "scrypt":
            raise ValueError(scheme)
        expected = base64.b64decode(digest)
        got = _scrypt(password, base64.b64decode(salt), int(n), int(r), int(p))
    except (ValueError, TypeError) as exc:
        raise PasswordError(f"the console password file is broken ({exc}); set it again with "
                            "`gateway console password`") from None
    return hmac.compare_digest(expected, got)


class PasswordFile:
    def __init__(self, path: Path) -> None:
        self.path = path

    def exists(self) -> bool:
        return self.path.exists()

    def stored(self) -> str:
        """The hash line ('' when there is no file)."""
        try:
            return self.path.read_text(encoding="utf-8").strip()
        except FileNotFoundError:
            return ""

    def set(self, password: str) -> None:
        line = hash_password(password)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(line + "\n")
        os.replace(tmp, self.path)

    def ensure(self) -> str | None:
        """Make a random password when there is none; returns it (to print once), else None."""
        if self.exists():
            return None
        password = secrets.token_urlsafe(12)
        self.set(password)
        return password

    def verify(self, password: str) -> bool:
        stored = self.stored()
        return bool(stored) and matches(stored, password)
