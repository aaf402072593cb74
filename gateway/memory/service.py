"""MemoryService: the one API over the memory stream (conversation, readings, CLI, MCP).

Threads, each created once: the embedder runs on its own thread, every write goes through one
writer thread (its own connection), reads run on a reader thread (its own connection; WAL lets
it read while the writer writes). Importance and embeddings are computed before the write
transaction, so the transaction itself is short and all-or-nothing.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from gateway.memory.device_users import user_of
from gateway.memory.errors import MemoryInputError
from gateway.memory.importance import heuristic_importance
from gateway.memory.retrieval import Scored, Weights, score_arrays
from gateway.memory.store import MemoryStore, Node, NodeDraft
from gateway.memory.tags import KINDS, NODE_TYPES, build_tags, normalize_tags, schema
from gateway.memory.vector_index import CodeIndex

log = logging.getLogger(__name__)
_USER = re.compile(r"^[A-Za-z0-9_.@-]{1,64}$")
MAX_CONTENT = 4000
KNN_CANDIDATES = 200  # candidates from the binary codes, rescored exactly (see gateway bench-memory)


class Embedder(Protocol):
    name: str
    dims: int

    def embed(self, texts: list[str]) -> np.ndarray: ...


def _check_user(user_id: str) -> str:
    if not isinstance(user_id, str) or not _USER.match(user_id):
        raise MemoryInputError(f"bad user id {user_id!r}: 1-64 characters of letters, digits and _ . @ -")
    return user_id


def _check_n(n: int, top: int = 200) -> int:
    if not isinstance(n, int) or not 1 <= n <= top:
        raise MemoryInputError(f"n must be an integer from 1 to {top}, got {n!r}")
    return n


class MemoryService:
    def __init__(self, path: Path | str, embedder_factory: Callable[[], Embedder], *,
                 users: dict[str, str] | None = None, default_user: str = "household", isolate_by_user: bool = True,
                 search_weights: tuple[float, float, float] = (0.0, 1.0, 0.5),
                 conversation_weights: tuple[float, float, float] = (0.8, 0.5, 0.5),
                 half_life_h: float = 24.0, clock: Callable[[], float] = time.time,
                 progress: Callable[[str], None] = lambda line: None) -> None:
        self.path = path
        self._embedder_factory = embedder_factory
        self.users = dict(users or {})
        self.default_user = _check_user(default_user)
        self.isolate_by_user = isolate_by_user
        self.search_weights = Weights(*search_weights)
        self.conversation_weights = Weights(*conversation_weights)
        self.half_life_h = half_life_h
        self.clock = clock
        self._progress = progress
        self._embed_pool = ThreadPoolExecutor(1, thread_name_prefix="memory-embed")
        self._write_pool = ThreadPoolExecutor(1, thread_name_prefix="memory-writer")
        self._read_pool = ThreadPoolExecutor(1, thread_name_prefix="memory-reader")
        self._embedder: Embedder | None = None
        self._writer: MemoryStore | None = None
        self._reader: MemoryStore | None = None
        self.writes = 0
        self.knn_candidates = KNN_CANDIDATES
        self._index = CodeIndex()  # used on the reader thread only

    @classmethod
    def from_config(cls, cfg: Any, clock: Callable[[], float] = time.time,
                    progress: Callable[[str], None] = lambda line: None) -> "MemoryService":
        from gateway.engines.minilm_embed import load_embedder
        from gateway.engines.store import ModelStore

        m = cfg.memory
        return cls(cfg.path(m.path), lambda: load_embedder(m.embedding, ModelStore(cfg)), users=m.users, default_user=m.default_user,
                   isolate_by_user=m.isolate_by_user, search_weights=m.search_weights,
                   conversation_weights=m.conversation_weights, half_life_h=m.recency_half_life_h,
                   clock=clock, progress=progress)

    # --- life cycle ----------------------------------------------------------------------------
    async def start(self) -> "MemoryService":
        loop = asyncio.get_running_loop()
        self._writer = await loop.run_in_executor(self._write_pool, MemoryStore, self.path)
        self._reader = await loop.run_in_executor(self._read_pool, MemoryStore, self.path)
        self._embedder = await loop.run_in_executor(self._embed_pool, self._embedder_factory)
        stored = await self._read(lambda s: s.meta("embedding_model"))
        if stored != self._embedder.name:
            await self.reembed(stored)
        return self

    async def close(self) -> None:
        for pool, store in ((self._write_pool, self._writer), (self._read_pool, self._reader)):
            if store is not None:
                await asyncio.get_running_loop().run_in_executor(pool, store.close)
        for pool in (self._embed_pool, self._write_pool, self._read_pool):
            pool.shutdown(wait=True)

    async def __aenter__(self) -> "MemoryService":
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def reembed(self, old_model: str | None) -> int:
        """Re-embed every node with the current model (after a model change); returns the count."""
        total = await self._read(lambda s: s.count())
        if total:
            self._progress(f"memory: embedding model changed ({old_model} -> {self._embedder.name}); "
                           f"re-embedding {total} memories")
        done = 0
        batches = await self._read(lambda s: list(s.iter_all()))
        for batch in batches:
            vecs = await self.embed([content for _, content in batch])
            await self._write(lambda s, b=batch, v=vecs: s.set_embeddings([(i, v[k]) for k, (i, _) in enumerate(b)]))
            done += len(batch)
            self._progress(f"memory: re-embedded {done}/{total}")
        await self._write(lambda s: s.set_meta("embedding_model", self._embedder.name))
        await self._read(lambda s: self._index.clear())
        return done

    # --- plumbing -----------------------------------------------------------------------------
    async def _read(self, fn: Callable[[MemoryStore], Any]) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._read_pool, fn, self._reader)

    async def _write(self, fn: Callable[[MemoryStore], Any]) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._write_pool, fn, self._writer)

    async def embed(self, texts: list[str]) -> np.ndarray:
        return await asyncio.get_running_loop().run_in_executor(self._embed_pool, self._embedder.embed, texts)

    async def embed_query(self, texts: list[str]) -> np.ndarray:
        """Queries may embed differently (e5's "query: " prefix); else like `embed`."""
        fn = getattr(self._embedder, "embed_query", self._embedder.embed)
        return await asyncio.get_running_loop().run_in_executor(self._embed_pool, fn, texts)

    def user_for(self, device_id: str) -> str:
        """The user a device belongs to (memory.users), else its own (`device.<id>`); everyone's
        the default user when isolate_by_user is off."""
        return user_of(device_id, self.users, self.default_user, self.isolate_by_user)

    # --- writes -------------------------------------------------------------------------------
    async def remember(self, user_id: str, content: str, *, kind: str | None = None, source: str | None = None,
                       persistent: bool = False, extra_tags: Iterable[str] = (), node_type: str = "observation",
                       importance: int | None = None, when: datetime | float | None = None,
                       pointer_ids: Iterable[int] = ()) -> Node:
        _check_user(user_id)
        content = (content or "").strip()
        if not content:
            raise MemoryInputError("content must not be empty")
        if len(content) > MAX_CONTENT:
            raise MemoryInputError(f"content is {len(content)} characters; the limit is {MAX_CONTENT}")
        if node_type not in NODE_TYPES:
            raise MemoryInputError(f"node type must be one of {', '.join(NODE_TYPES)}, got {node_type!r}")
        if kind is not None and kind not in KINDS:
            raise MemoryInputError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
        if importance is not None and not (isinstance(importance, int) and 0 <= importance <= 10):
            raise MemoryInputError(f"importance must be an integer 0-10, got {importance!r}")
        if isinstance(extra_tags, str):
            raise MemoryInputError("extra_tags must be a list of namespace:value strings, not one string")
        tags = build_tags(kind, source, persistent, extra_tags)
        ts = when.timestamp() if isinstance(when, datetime) else (when if when is not None else self.clock())
        score = importance if importance is not None else heuristic_importance(content, kind)
        vec = (await self.embed([content]))[0]
        draft = NodeDraft(user_id, node_type, content, score, float(ts), tuple(tags), vec, tuple(pointer_ids))
        node = await self._write(lambda s: s.insert(draft, self.clock()))
        self.writes += 1
        return node

    async def remember_turn(self, user_id: str, utterance: str, reply: str, device_id: str) -> Node:
        """One conversation node per turn: what the user said and what the gateway answered."""
        day = datetime.fromtimestamp(self.clock()).astimezone().date().isoformat()
        return await self.remember(user_id, f"User: {utterance}\nAssistant: {reply}", node_type="conversation",
                                   source=device_id, extra_tags=(f"date:{day}",),
                                   importance=heuristic_importance(utterance))

    async def set_profile(self, user_id: str, *, portrait: str | None = None, extra_info: str | None = None) -> None:
        _check_user(user_id)
        await self._write(lambda s: s.set_profile(user_id, self.clock(), portrait, extra_info))

    # --- reads --------------------------------------------------------------------------------
    async def search(self, user_id: str, query: str, n: int = 10, *, all_of: Iterable[str] = (),
                     any_of: Iterable[str] = (), weights: Weights | None = None, touch: bool = True) -> list[Scored]:
        """The n best nodes for `query` by the retrieval score; tag filters are all-of / any-of."""
        _check_user(user_id)
        _check_n(n)
        if not (query or "").strip():
            raise MemoryInputError("query must not be empty")
        q = (await self.embed_query([query]))[0]
        return await self.search_by_vector(user_id, q, n, all_of=all_of, any_of=any_of, weights=weights, touch=touch)

    async def search_by_vector(self, user_id: str, q: np.ndarray, n: int = 10, *, all_of: Iterable[str] = (),
                               any_of: Iterable[str] = (), weights: Weights | None = None,
                               touch: bool = True) -> list[Scored]:
        """`search` with the query already embedded (unit length)."""
        _check_user(user_id)
        _check_n(n)
        all_of, any_of = normalize_tags(all_of), normalize_tags(any_of)
        weights = weights or self.search_weights

        now, floor = self.clock(), getattr(self._embedder, "cosine_floor", 0.0)

        def run(s: MemoryStore) -> list[Scored]:
            if all_of or any_of:
                ids = s.filtered_ids(user_id, all_of, any_of, limit=5000)
            else:
                ids = self._index.candidates(s.conn, user_id, q, max(self.knn_candidates, 10 * n))
                ids += [node.id for node in s.recent(user_id, 20)]
            node_ids, vecs, importance, last, ts = s.score_rows(list(dict.fromkeys(ids)))
            order, scores, rel = score_arrays(vecs, importance, last, ts, q, weights, now, self.half_life_h, floor)
            top = order[:n]
            nodes = {node.id: node for node in s.get(node_ids[top].tolist())}
            return [Scored(nodes[int(node_ids[i])], float(scores[i]), float(rel[i])) for i in top]

        results = await self._read(run)
        if touch and results:
            ids = [r.node.id for r in results]
            await self._write(lambda s: s.touch(ids, self.clock()))
        return results

    async def recent(self, user_id: str, n: int = 10, *, all_of: Iterable[str] = (), any_of: Iterable[str] = (),
                     types: Iterable[str] = (), since: float | None = None, until: float | None = None) -> list[Node]:
        _check_user(user_id)
        _check_n(n, 1000)
        all_of, any_of, types = normalize_tags(all_of), normalize_tags(any_of), list(types)
        if bad := [t for t in types if t not in NODE_TYPES]:
            raise MemoryInputError(f"unknown node types {bad}: use {', '.join(NODE_TYPES)}")
        return await self._read(lambda s: s.recent(user_id, n, all_of=all_of, any_of=any_of, types=types,
                                                   since=since, until=until))

    async def active_rules(self, user_id: str, n: int = 100) -> list[Node]:
        return await self.recent(user_id, n, all_of=("kind:rule", "persistent:true"))

    async def reflections(self, user_id: str, n: int = 10) -> list[Node]:
        return await self.recent(user_id, n, types=("reflection",))

    async def profile(self, user_id: str) -> dict:
        _check_user(user_id)
        return await self._read(lambda s: s.profile(user_id))

    async def count(self, user_id: str | None = None) -> int:
        return await self._read(lambda s: s.count(user_id))

    async def known_users(self) -> list[str]:
        return await self._read(lambda s: s.users())

    async def export(self, user_id: str | None = None) -> list[Node]:
        """Every node (of one user, or of everyone), oldest first."""
        batches = await self._read(lambda s: list(s.iter_nodes(user_id)))
        return [node for batch in batches for node in batch]

    async def import_nodes(self, items: Iterable[dict], default_user: str | None = None) -> int:
        """Write exported nodes (dicts as `Node.as_dict()`) again, re-embedding them; ids are new,
        and pointer_ids are translated (sources come before the reflections that point at them)."""
        new_ids: dict[int, int] = {}
        for d in items:
            if not isinstance(d, dict) or not isinstance(d.get("content"), str):
                raise MemoryInputError(f"not an exported memory: {str(d)[:80]}")
            node = await self.remember(
                d.get("user_id") or default_user or self.default_user, d["content"],
                node_type=d.get("type", "observation"), extra_tags=d.get("tags", ()), importance=d.get("importance"),
                when=d.get("ts"), pointer_ids=[new_ids.get(i, i) for i in d.get("pointer_ids", ())])
            if isinstance(d.get("id"), int):
                new_ids[d["id"]] = node.id
        return len(new_ids)

    def schema(self) -> dict:
        return schema()
