"""A device token as mosquitto's password file stores it: PBKDF2-SHA512, `$7$<iterations>$<salt>$<hash>`.

mosquitto 2.x (`mosquitto_passwd`) writes this format with 101 iterations and a 12-byte salt,
both base64; the gateway writes the same from Python so the embedded broker
(gateway/links/mosquitto.py) checks device logins itself. Only the hash is kept: the registry
stores it beside the token's SHA-256 when a token is made (`add_device`).
"""

from __future__ import annotations

import base64
import hashlib
import secrets

ITERATIONS = 101  # mosquitto_passwd's default
SALT_BYTES = 12


def mosquitto_hash(password: str, salt: bytes | None = None, iterations: int = ITERATIONS) -> str:
    salt = secrets.token_bytes(SALT_BYTES) if salt is None else salt
    digest = hashlib.pbkdf2_hmac("sha512", password.encode("utf-8"), salt, iterations)
    return f"$7${iterations}${base64.b64encode(salt).decode()}${base64.b64encode(digest).decode()}"
