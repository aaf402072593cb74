"""Memory fixtures: the real embedding model loaded once; a fresh database per test."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from gateway.app import Gateway
from gateway.engines.minilm_embed import MiniLmEmbedder
from gateway.links.memory import MemoryLink
from gateway.config import parse_config
from gateway.memory.service import MemoryService
from gateway.engines.store import ModelStore

ROOT = Path(__file__).resolve().parents[2]


class FakeClock:
    """An injected wall clock (unix seconds) that tests move by hand."""

    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class SharedEmbedder:
    """The one real MiniLM instance, shared by every test's service (it is only used from one
    thread at a time: each service calls it from its own embed thread, one test at a time)."""

    def __init__(self, inner: MiniLmEmbedder) -> None:
        self.inner, self.name, self.dims, self.cosine_floor = inner, inner.name, inner.dims, inner.cosine_floor

    def embed(self, texts: list[str]):
        return self.inner.embed(texts)

    def embed_query(self, texts: list[str]):
        return self.inner.embed_query(texts)


@pytest.fixture(scope="session")
def embedder() -> SharedEmbedder:
    return SharedEmbedder(MiniLmEmbedder.from_store(ModelStore(parse_config({}, ROOT))))


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest_asyncio.fixture(params=["sqlite", "postgres"])
async def memory(request: pytest.FixtureRequest, tmp_path: Path, embedder: SharedEmbedder,
                 clock: FakeClock) -> AsyncIterator[MemoryService]:
    """The memory service on each store: SQLite (the default) and PostgreSQL + pgvector."""
    open_store = None
    if request.param == "postgres":
        from gateway.storage.memory_store import PostgresMemoryStore
        from gateway.storage.schema import migrate

        import psycopg

        dsn = request.getfixturevalue("postgres_dsn")
        with psycopg.connect(dsn) as conn:
            migrate(conn)
        open_store = lambda: PostgresMemoryStore(dsn)  # noqa: E731
    service = MemoryService(tmp_path / "memory.db", lambda: embedder, users={"box-anna": "anna", "bp-anna": "anna",
                            "box-ben": "ben"}, clock=clock, open_store=open_store)
    async with service:
        yield service


async def until(dev, kind, timeout: float = 20):
    """The next `kind` message the device receives (for ReplyText: the closing one)."""
    async with asyncio.timeout(timeout):
        while True:
            msg = await dev.receive()
            if isinstance(msg, kind) and getattr(msg, "final", True):
                return msg


@pytest_asyncio.fixture(loop_scope="session")
async def gateway_with_memory(tmp_path: Path, fake_runner, embedder) -> AsyncIterator[tuple[Gateway, MemoryLink]]:
    """A running gateway (fake engines) with a memory on an in-memory link; bp-anna and box-anna belong to anna."""
    cfg = parse_config({"server": {"hello_timeout_s": 2}, "devices": {"database": str(tmp_path / "gw.db")},
                        "memory": {"path": str(tmp_path / "memory.db"),
                                   "users": {"bp-anna": "anna", "box-anna": "anna"}}}, ROOT)
    m = cfg.memory
    memory = MemoryService(cfg.path(m.path), lambda: embedder, users=m.users, default_user=m.default_user)
    link = MemoryLink()
    gateway = Gateway(cfg, fake_runner, [link], memory=memory)
    ready = asyncio.Event()
    task = asyncio.create_task(gateway.serve(ready))
    await asyncio.wait_for(ready.wait(), 10)
    yield gateway, link
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
