"""The PostgreSQL test server itself: it runs, each test gets its own database, pgvector loads,
and it can be stopped and started again with its committed data (what the fault tests rely on)."""

from __future__ import annotations

import psycopg
import pytest


def test_fresh_database_with_pgvector(postgres_dsn: str) -> None:
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        assert conn.execute("SHOW server_version").fetchone()[0].startswith("18")
        assert conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'").fetchone()[0] == 0
        conn.execute("CREATE EXTENSION vector")
        conn.execute("CREATE TABLE items (id int PRIMARY KEY, embedding halfvec(3))")
        conn.execute("CREATE INDEX ON items USING hnsw (embedding halfvec_ip_ops)")
        conn.execute("INSERT INTO items VALUES (1, '[1,0,0]'), (2, '[0,1,0]'), (3, '[0.9,0.1,0]')")
        rows = conn.execute("SELECT id FROM items ORDER BY embedding <#> '[1,0,0]' LIMIT 2").fetchall()
        assert [r[0] for r in rows] == [1, 3]


def test_each_test_has_its_own_database(postgres_dsn: str, postgres_server) -> None:
    other = postgres_server.create_database()
    assert other != postgres_dsn
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE mine (x int)")
    with psycopg.connect(other, autocommit=True) as conn:
        assert conn.execute("SELECT to_regclass('mine')").fetchone()[0] is None


def test_stop_and_start_keeps_committed_rows(postgres_dsn: str, postgres_server) -> None:
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE kept (x int)")
        conn.execute("INSERT INTO kept VALUES (42)")
    postgres_server.stop("immediate")
    try:
        with pytest.raises(psycopg.OperationalError):
            psycopg.connect(postgres_dsn, connect_timeout=2)
    finally:
        postgres_server.start()
    with psycopg.connect(postgres_dsn) as conn:
        assert conn.execute("SELECT x FROM kept").fetchall() == [(42,)]
