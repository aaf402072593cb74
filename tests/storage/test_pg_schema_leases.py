"""device_leases in the versioned migrations: a database whose lease table the old lease store
made (before schema 3) migrates cleanly and keeps its leases; a fresh one gets it from the
migrations, and the lease store works on both."""

from __future__ import annotations

import psycopg

from gateway.cluster.leases import PgLeases
from gateway.storage.schema import MIGRATIONS, migrate

# what the lease store ran itself before the table moved into the migrations
OLD_LEASE_STORE_SCHEMA = """
CREATE TABLE IF NOT EXISTS device_leases (
    device_id  text PRIMARY KEY,
    holder     text NOT NULL,
    epoch      bigint NOT NULL,
    expires_at timestamptz NOT NULL
)
"""


async def test_a_database_with_the_old_lease_table_migrates_and_keeps_its_leases(postgres_dsn: str) -> None:
    with psycopg.connect(postgres_dsn) as conn:  # a cluster of the old code: schema 1 + its lease table
        conn.execute("CREATE TABLE schema_version (version integer NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())")
        conn.execute(MIGRATIONS[0])
        conn.execute("INSERT INTO schema_version (version) VALUES (1)")
        conn.execute(OLD_LEASE_STORE_SCHEMA)
        conn.execute("INSERT INTO device_leases VALUES ('box-1', 'gw-a', 7, now() + interval '1 hour')")
    with psycopg.connect(postgres_dsn) as conn:
        assert migrate(conn) == len(MIGRATIONS)
        assert conn.execute("SELECT device_id, holder, epoch FROM device_leases").fetchall() == [("box-1", "gw-a", 7)]
        assert [v for (v,) in conn.execute("SELECT version FROM schema_version ORDER BY version")] == list(
            range(1, len(MIGRATIONS) + 1))
        assert conn.execute("SELECT count(*) FROM job_runs").fetchone() == (0,)
    a, b = PgLeases(postgres_dsn, "gw-a", 6, 5), PgLeases(postgres_dsn, "gw-b", 6, 5)
    try:
        assert await b.claim(["box-1"]) == {}  # gw-a's lease from before the upgrade still holds
        assert await a.claim(["box-1"]) == {"box-1": 8}
    finally:
        await a.close()
        await b.close()


async def test_a_fresh_database_gets_the_lease_table_from_the_migrations(postgres_dsn: str) -> None:
    leases = PgLeases(postgres_dsn, "gw-a", 6, 5)
    try:
        with psycopg.connect(postgres_dsn) as conn:
            migrate(conn)
        assert await leases.claim(["box-1"]) == {"box-1": 1}
        with psycopg.connect(postgres_dsn) as conn:
            assert migrate(conn) == len(MIGRATIONS)  # again: nothing to do
            assert conn.execute("SELECT holder FROM device_leases").fetchall() == [("gw-a",)]
    finally:
        await leases.close()
