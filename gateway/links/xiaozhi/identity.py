"""Who a xiaozhi box is: its device id (from the MAC in its Device-Id header) and its bearer token."""

from __future__ import annotations

import re

_MAC = re.compile(r"^[0-9a-fA-F]{2}([:-]?[0-9a-fA-F]{2}){5}$")


def device_id_of(mac: str) -> str | None:
    """`aa:bb:cc:dd:ee:ff` -> `xiaozhi-aabbccddeeff` (the box's id in the registry), None if not a MAC."""
    mac = mac.strip()
    if not _MAC.fullmatch(mac):
        return None
    return "xiaozhi-" + re.sub(r"[:-]", "", mac).lower()


def bearer_token(authorization: str) -> str:
    """The token of an `Authorization: Bearer <token>` header (the firmware adds `Bearer `)."""
    scheme, _, token = authorization.strip().partition(" ")
    return token.strip() if scheme.lower() == "bearer" else authorization.strip()
