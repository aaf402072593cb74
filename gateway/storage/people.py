"""The console's device -> person mapping on PostgreSQL: the PeopleStore (gateway/devices/people.py)
several gateways share; each re-reads it every few seconds (`gateway.devices.people.follow`)."""

from __future__ import annotations

from psycopg_pool import AsyncConnectionPool


class PostgresPeople:
    def __init__(self, pool: AsyncConnectionPool) -> None:
        self._pool = pool

    async def load(self) -> dict[str, str]:
        async with self._pool.connection() as conn:
            rows = await (await conn.execute("SELECT device_id, person FROM device_people ORDER BY device_id")).fetchall()
        return dict(rows)

    async def set(self, device_id: str, person: str, now: float) -> None:
        async with self._pool.connection() as conn:
            await conn.execute(
                "INSERT INTO device_people (device_id, person, updated_at) VALUES (%s, %s, %s)"
                " ON CONFLICT (device_id) DO UPDATE SET person = excluded.person, updated_at = excluded.updated_at",
                (device_id, person, now))

    async def clear(self, device_id: str) -> bool:
        async with self._pool.connection() as conn:
            return (await conn.execute("DELETE FROM device_people WHERE device_id = %s", (device_id,))).rowcount == 1
