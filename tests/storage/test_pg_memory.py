"""The memory on PostgreSQL + pgvector shared by two gateways, and its benchmark's method.
(Every test of tests/memory that takes the `memory` fixture also runs on PostgreSQL.)"""

from __future__ import annotations

import numpy as np
import psycopg
import pytest

from gateway.memory.service import MemoryService
from gateway.storage.bench_memory import bench_postgres
from gateway.storage.memory_store import PostgresMemoryStore, halfvec_array, vector_literal
from gateway.storage.schema import migrate
from tests.memory.conftest import FakeClock, embedder  # noqa: F401  (the real MiniLM fixture)


@pytest.fixture
def pg_memory_dsn(postgres_dsn: str) -> str:
    with psycopg.connect(postgres_dsn) as conn:
        migrate(conn)
    return postgres_dsn


def test_halfvec_round_trip(pg_memory_dsn: str) -> None:
    vec = np.random.default_rng(1).normal(size=384).astype(np.float32)
    vec /= np.linalg.norm(vec)
    with psycopg.connect(pg_memory_dsn) as conn:
        [blob] = conn.execute("SELECT halfvec_send(%s::halfvec)", (vector_literal(vec),)).fetchone()
    back = halfvec_array([bytes(blob)])[0]
    assert np.abs(back - vec).max() < 1e-3 and back.dtype == np.float32
    with pytest.raises(ValueError):
        vector_literal(np.zeros(12, np.float32))


async def test_two_gateways_share_one_memory(pg_memory_dsn: str, embedder) -> None:
    clock = FakeClock()
    services = [MemoryService(":postgres:", lambda: embedder, clock=clock,
                              open_store=lambda: PostgresMemoryStore(pg_memory_dsn)) for _ in range(2)]
    a, b = [await s.start() for s in services]
    try:
        node = await a.remember("anna", "Anna's granddaughter Mia plays the violin", kind="fact", source="box-1")
        await a.remember("anna", "The plumber comes on Tuesday", kind="event")
        [found, *_] = await b.search("anna", "what instrument does Mia play?", 3)
        assert found.node.id == node.id and found.node.content == node.content
        assert "kind:fact" in found.node.tags
        assert [n.id for n in await b.recent("anna", 5, all_of=["source:*"])] == [node.id]  # a prefix match
        assert [n.id for n in await b.recent("anna", 5, any_of=["kind:fact"])] == [node.id]
        assert await b.search("ben", "violin", 3) == []  # another user's memory stays apart
        assert await b.forget("anna", node.id)
        assert all(r.node.id != node.id for r in await a.search("anna", "violin", 3))
    finally:
        for s in services:
            await s.close()


async def test_bench_method_on_a_small_stream(postgres_server, embedder) -> None:
    lines: list[str] = []
    results = await bench_postgres(lambda: embedder, (600,), postgres_server.dsn(), out=lines.append,
                                   candidates=(100,), composed=True)
    figures = results["600@100"]
    assert figures["nodes"] == 600 and figures["recall_at_10"] >= 0.9
    assert any("HNSW index over 600 nodes built" in line for line in lines)
    with psycopg.connect(postgres_server.dsn()) as conn:  # its temporary database is gone
        assert conn.execute("SELECT count(*) FROM pg_database WHERE datname LIKE 'gateway_bench_%'").fetchone()[0] == 0
