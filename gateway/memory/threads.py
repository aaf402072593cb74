"""The memory's threads, each created once, and the one way onto each of them.

The embedder runs on its own thread; every write goes through one writer thread (its own store
connection); reads run on a reader thread (its own connection; WAL lets it read while the writer
writes). The service (gateway/memory/service.py) computes importance and embeddings before it
writes, so a write transaction itself is short and all-or-nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

import numpy as np

from gateway.memory.node_store import NodeStore


class Embedder(Protocol):
    """What the memory needs of its embedding model (gateway/engines/minilm_embed.py)."""

    name: str
    dims: int
    cosine_floor: float  # where the cosines of unrelated texts sit: relevance is rescaled from there

    def embed(self, texts: list[str]) -> np.ndarray: ...  # passages (what is stored): (n, dims), unit length
    def embed_query(self, texts: list[str]) -> np.ndarray: ...  # queries (e5 embeds them with "query: ")


class MemoryThreads:
    def __init__(self, open_store: Callable[[], NodeStore], embedder_factory: Callable[[], Embedder]) -> None:
        self._open_store = open_store  # the writer and the reader each open their own, on their thread
        self._embedder_factory = embedder_factory
        self.embed_pool = ThreadPoolExecutor(1, thread_name_prefix="memory-embed")
        self.write_pool = ThreadPoolExecutor(1, thread_name_prefix="memory-writer")
        self.read_pool = ThreadPoolExecutor(1, thread_name_prefix="memory-reader")
        self._embedder: Embedder | None = None
        self.writer: NodeStore | None = None
        self.reader: NodeStore | None = None

    @property
    def embedder(self) -> Embedder:
        assert self._embedder is not None, "MemoryThreads.start() first"
        return self._embedder

    async def start(self) -> None:
        """Open the writer's and the reader's stores, and load the embedder, each on its thread."""
        loop = asyncio.get_running_loop()
        self.writer = await loop.run_in_executor(self.write_pool, self._open_store)
        self.reader = await loop.run_in_executor(self.read_pool, self._open_store)
        self._embedder = await loop.run_in_executor(self.embed_pool, self._embedder_factory)

    async def close(self) -> None:
        for pool, store in ((self.write_pool, self.writer), (self.read_pool, self.reader)):
            if store is not None:
                await asyncio.get_running_loop().run_in_executor(pool, store.close)
        for pool in (self.embed_pool, self.write_pool, self.read_pool):
            pool.shutdown(wait=True)

    async def read(self, fn: Callable[[NodeStore], Any]) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self.read_pool, fn, self.reader)

    async def write(self, fn: Callable[[NodeStore], Any]) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self.write_pool, fn, self.writer)

    async def embed(self, texts: list[str]) -> np.ndarray:
        return await asyncio.get_running_loop().run_in_executor(self.embed_pool, self.embedder.embed, texts)

    async def embed_query(self, texts: list[str]) -> np.ndarray:
        """Queries may embed differently (e5's "query: " prefix); else like `embed`."""
        return await asyncio.get_running_loop().run_in_executor(self.embed_pool, self.embedder.embed_query, texts)
