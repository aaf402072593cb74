"""The per-device lease in PostgreSQL: the fence that keeps two gateways from answering one device.

One row per device in `device_leases(device_id, holder, epoch, expires_at)`. A claim is one
statement that succeeds only when the row is free, expired or already this holder's, and bumps
the epoch (the fencing token): at any instant at most one holder has an unexpired lease, and
PostgreSQL's clock (`now()`) decides, never the gateways'. Claims, renewals and releases take
many devices in one statement. The connection is opened lazily and again after a failure; every
call is bounded by `timeout_s` and raises `LeaseStoreDown` when the database cannot answer (the
caller then lets its leases run out: it stops answering when they would have expired). The
table is created by the versioned migrations (gateway/storage/schema.py, script 3), which the
gateway runs when it opens its PostgreSQL backend, before any link serves.

`take` is the one claim that does not wait for another holder's lease to run out: a WebSocket or
CoAP device said Hello to this gateway (a load balancer or DNS moved it here), so this gateway
takes the lease over at once with the next epoch; the old holder's next renewal finds it gone.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

import psycopg

log = logging.getLogger(__name__)

CLAIM = """
INSERT INTO device_leases AS l (device_id, holder, epoch, expires_at)
SELECT d, %(me)s, 1, now() + make_interval(secs => %(ttl)s) FROM unnest(%(devices)s::text[]) AS d
ON CONFLICT (device_id) DO UPDATE SET holder = EXCLUDED.holder, epoch = l.epoch + 1, expires_at = EXCLUDED.expires_at
WHERE l.holder = EXCLUDED.holder OR l.expires_at < now()
RETURNING device_id, epoch
"""

# The device chose this gateway (its session's Hello): taken whoever holds it; the holder it had
# until now, if its lease was still running, comes back for the log.
TAKE = """
WITH before AS (
  SELECT device_id, holder FROM device_leases
  WHERE device_id = ANY(%(devices)s::text[]) AND holder <> %(me)s AND expires_at > now()
)
INSERT INTO device_leases AS l (device_id, holder, epoch, expires_at)
SELECT d, %(me)s, 1, now() + make_interval(secs => %(ttl)s) FROM unnest(%(devices)s::text[]) AS d
ON CONFLICT (device_id) DO UPDATE SET holder = EXCLUDED.holder, epoch = l.epoch + 1, expires_at = EXCLUDED.expires_at
RETURNING device_id, epoch, (SELECT holder FROM before WHERE before.device_id = l.device_id)
"""

RENEW = """
UPDATE device_leases SET expires_at = now() + make_interval(secs => %(ttl)s)
WHERE holder = %(me)s AND expires_at > now() AND device_id = ANY(%(devices)s::text[])
RETURNING device_id, epoch
"""

RELEASE = """
UPDATE device_leases SET expires_at = '-infinity'
WHERE holder = %(me)s AND device_id = ANY(%(devices)s::text[])
"""


RELEASE_ALL = """
UPDATE device_leases SET expires_at = '-infinity' WHERE holder = %(me)s AND expires_at > now()
"""


class LeaseStoreDown(Exception):
    """PostgreSQL did not answer (unreachable, restarting, too slow); str() says why."""


class PgLeases:
    def __init__(self, dsn: str, holder: str, ttl_s: float, timeout_s: float) -> None:
        self._dsn = dsn
        self.holder = holder
        self.ttl_s = ttl_s
        self.timeout_s = timeout_s
        self._conn: psycopg.AsyncConnection | None = None
        self._lock = asyncio.Lock()  # one statement at a time on the one connection

    async def _run(self, sql: str, devices: Sequence[str]) -> dict[str, int]:
        return {row[0]: int(row[1]) for row in await self._rows(sql, devices)}

    async def _rows(self, sql: str, devices: Sequence[str]) -> list[tuple]:
        params = {"me": self.holder, "ttl": self.ttl_s, "devices": list(devices)}
        async with self._lock:
            try:
                async with asyncio.timeout(self.timeout_s):
                    if self._conn is None or self._conn.closed:
                        self._conn = await psycopg.AsyncConnection.connect(
                            self._dsn, autocommit=True, connect_timeout=max(1, int(self.timeout_s)))
                    cur = await self._conn.execute(sql, params)
                    rows = await cur.fetchall() if cur.description else []
            except (psycopg.Error, OSError, TimeoutError) as exc:
                await self._drop()
                raise LeaseStoreDown(str(exc).strip() or exc.__class__.__name__) from None
            except asyncio.CancelledError:  # mid-statement: the next call starts on a fresh connection
                await self._drop()
                raise
        return rows

    async def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                await conn.close()
            except (psycopg.Error, OSError):
                pass

    async def claim(self, devices: Sequence[str]) -> dict[str, int]:
        """The devices now leased to this holder, with their new epochs (others hold the rest)."""
        return await self._run(CLAIM, devices) if devices else {}

    async def take(self, devices: Sequence[str]) -> dict[str, tuple[int, str | None]]:
        """Lease them to this holder now, whoever holds them: device -> (new epoch, the other
        holder whose unexpired lease was taken over, or None)."""
        if not devices:
            return {}
        return {row[0]: (int(row[1]), row[2]) for row in await self._rows(TAKE, devices)}

    async def renew(self, devices: Sequence[str]) -> dict[str, int]:
        """Extend this holder's unexpired leases; the ones not returned are lost."""
        return await self._run(RENEW, devices) if devices else {}

    async def release(self, devices: Sequence[str]) -> None:
        """Free them at once (a clean stop, a device that went offline or moved)."""
        if devices:
            await self._run(RELEASE, devices)

    async def release_all(self) -> None:
        """Free every lease of this holder (a clean stop), claimed a moment ago or long held."""
        await self._run(RELEASE_ALL, [])

    async def close(self) -> None:
        async with self._lock:
            await self._drop()
