"""MemoryService: the one API over the memory stream (conversation, readings, CLI, MCP).

Its blocking work runs on the memory's threads (gateway/memory/threads.py: the embedder's, one
writer, one reader). Importance and embeddings are computed before the write transaction, so the
transaction itself is short and all-or-nothing.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from gateway.memory.device_users import user_of
from gateway.memory.errors import MemoryInputError
from gateway.memory.importance import heuristic_importance
from gateway.memory.node_input import NodeSpec, node_input
from gateway.memory.node_input import check_user as _check_user
from gateway.memory.node_search import NodeQuery, best_nodes
from gateway.memory.retrieval import Scored, Weights
from gateway.memory.node_store import NodeStore
from gateway.memory.nodes import Node, NodeDraft
from gateway.memory.store import MemoryStore
from gateway.memory.tags import DISABLED, NODE_TYPES, normalize_tags, schema
from gateway.memory.threads import Embedder, MemoryThreads

log = logging.getLogger(__name__)
KNN_CANDIDATES = 200  # candidates from the binary codes, rescored exactly (see gateway bench-memory)


def _check_n(n: int, top: int = 200) -> int:
    if not isinstance(n, int) or not 1 <= n <= top:
        raise MemoryInputError(f"n must be an integer from 1 to {top}, got {n!r}")
    return n


class MemoryService:
    def __init__(self, path: Path | str, embedder_factory: Callable[[], Embedder], *,
                 users: Mapping[str, str] | None = None, default_user: str = "household", isolate_by_user: bool = True,
                 search_weights: tuple[float, float, float] = (0.0, 1.0, 0.5),
                 conversation_weights: tuple[float, float, float] = (0.8, 0.5, 0.5),
                 half_life_h: float = 24.0, clock: Callable[[], float] = time.time,
                 progress: Callable[[str], None] = lambda line: None,
                 open_store: Callable[[], NodeStore] | None = None) -> None:
        self.path = path
        # the writer and the reader each open their own store on their thread: SQLite at `path`
        # unless the composition root passes another (storage.backend: postgres)
        self.threads = MemoryThreads(open_store or (lambda: MemoryStore(path)), embedder_factory)
        self.users = users if users is not None else {}  # device id -> user, live (DevicePeople): not copied
        self.default_user = _check_user(default_user)
        self.isolate_by_user = isolate_by_user
        self.search_weights = Weights(*search_weights)
        self.conversation_weights = Weights(*conversation_weights)
        self.half_life_h = half_life_h
        self.clock = clock
        self._progress = progress
        self.writes = 0
        self.knn_candidates = KNN_CANDIDATES
        self._alt_vectors: dict[str, np.ndarray] = {}  # NodeSpec.embed_text -> vector (few, reused)

    @classmethod
    def from_config(cls, cfg: Any, clock: Callable[[], float] = time.time,
                    progress: Callable[[str], None] = lambda line: None,
                    open_store: Callable[[], NodeStore] | None = None) -> "MemoryService":
        from gateway.engines.minilm_embed import load_embedder
        from gateway.engines.store import ModelStore

        m = cfg.memory
        return cls(cfg.path(m.path), lambda: load_embedder(m.embedding, ModelStore(cfg)), users=m.users, default_user=m.default_user,
                   isolate_by_user=m.isolate_by_user, search_weights=m.search_weights,
                   conversation_weights=m.conversation_weights, half_life_h=m.recency_half_life_h,
                   clock=clock, progress=progress, open_store=open_store)

    # --- life cycle ----------------------------------------------------------------------------
    async def start(self) -> "MemoryService":
        await self.threads.start()
        stored = await self._read(lambda s: s.meta("embedding_model"))
        if stored != self.threads.embedder.name:
            await self.reembed(stored)
        return self

    async def close(self) -> None:
        await self.threads.close()

    async def __aenter__(self) -> "MemoryService":
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def reembed(self, old_model: str | None) -> int:
        """Re-embed every node with the current model (after a model change); returns the count."""
        total = await self._read(lambda s: s.count())
        if total:
            self._progress(f"memory: embedding model changed ({old_model} -> {self.threads.embedder.name}); "
                           f"re-embedding {total} memories")
        done = 0
        batches = await self._read(lambda s: list(s.iter_all()))
        for batch in batches:
            vecs = await self.embed([content for _, content in batch])
            await self._write(lambda s, b=batch, v=vecs: s.set_embeddings([(i, v[k]) for k, (i, _) in enumerate(b)]))
            done += len(batch)
            self._progress(f"memory: re-embedded {done}/{total}")
        await self._write(lambda s: s.set_meta("embedding_model", self.threads.embedder.name))
        await self._read(lambda s: s.clear_index())
        return done

    # --- plumbing -----------------------------------------------------------------------------
    async def _read(self, fn: Callable[[NodeStore], Any]) -> Any:
        return await self.threads.read(fn)

    async def _write(self, fn: Callable[[NodeStore], Any]) -> Any:
        return await self.threads.write(fn)

    async def embed(self, texts: list[str]) -> np.ndarray:
        return await self.threads.embed(texts)

    async def embed_query(self, texts: list[str]) -> np.ndarray:
        """Queries may embed differently (e5's "query: " prefix); else like `embed`."""
        return await self.threads.embed_query(texts)

    def user_for(self, device_id: str) -> str:
        """The user a device belongs to (memory.users), else its own (`device.<id>`); everyone's
        the default user when isolate_by_user is off."""
        return user_of(device_id, self.users, self.default_user, self.isolate_by_user)

    # --- writes -------------------------------------------------------------------------------
    async def remember(self, user_id: str, content: str, *, kind: str | None = None, source: str | None = None,
                       persistent: bool = False, extra_tags: Iterable[str] = (), node_type: str = "observation",
                       importance: int | None = None, when: datetime | float | None = None,
                       pointer_ids: Iterable[int] = ()) -> Node:
        spec = node_input(user_id, content, now=self.clock(), kind=kind, source=source, persistent=persistent,
                          extra_tags=extra_tags, node_type=node_type, importance=importance, when=when,
                          pointer_ids=pointer_ids)
        return (await self.remember_many([spec]))[0]

    async def remember_many(self, specs: list[NodeSpec], cursor: tuple[str, int] | None = None) -> list[Node]:
        """Embed the nodes in one call (off the loop), then write them, and `cursor` (name, position)
        when given, in one transaction: all of them or none. A spec's `embed_text`, when set, is
        embedded once and its vector reused (the same few texts for every sensor reading)."""
        vectors = await self._vectors(specs)
        drafts = [NodeDraft(s.user_id, s.type, s.content, s.importance, s.ts, s.tags, v, s.pointer_ids)
                  for s, v in zip(specs, vectors)]
        nodes = await self._write(lambda s: s.insert_many(drafts, self.clock(), cursor))
        self.writes += len(nodes)
        return nodes

    async def _vectors(self, specs: list[NodeSpec]) -> list[np.ndarray]:
        alt = self._alt_vectors
        todo = list(dict.fromkeys(s.text_to_embed for s in specs if not s.embed_text or s.embed_text not in alt))
        fresh = dict(zip(todo, await self.embed(todo))) if todo else {}
        for s in specs:
            if s.embed_text and s.embed_text not in alt:
                if len(alt) >= 1024:  # bounded: forget the oldest
                    del alt[next(iter(alt))]
                alt[s.embed_text] = fresh[s.embed_text]
        return [alt[s.embed_text] if s.embed_text else fresh[s.content] for s in specs]

    async def cursor(self, name: str) -> int | None:
        """A feed's position stored with the memories it produced (see gateway/memory/reading_feed.py)."""
        return await self._write(lambda s: s.cursor(name))

    async def set_cursor(self, name: str, position: int) -> None:
        await self._write(lambda s: s.set_cursor(name, position))

    async def remember_turn(self, user_id: str, utterance: str, reply: str, device_id: str) -> Node:
        """One conversation node per turn: what the user said and what the gateway answered."""
        day = datetime.fromtimestamp(self.clock()).astimezone().date().isoformat()
        return await self.remember(user_id, f"User: {utterance}\nAssistant: {reply}", node_type="conversation",
                                   source=device_id, extra_tags=(f"date:{day}",),
                                   importance=heuristic_importance(utterance))

    async def forget(self, user_id: str, node_id: int) -> bool:
        """Delete one of the user's memories (a rule deleted no longer fires); False when the user has
        no such memory. The search index is rebuilt at the next search."""
        _check_user(user_id)
        gone = await self._write(lambda s: s.delete(user_id, node_id))
        if gone:
            await self._read(lambda s: s.clear_index())
            log.info("memory: %s forgot memory #%d", user_id, node_id)
        return gone

    async def rewrite(self, user_id: str, node_id: int, content: str, *, kind: str | None = None,
                      source: str | None = None, persistent: bool = False, extra_tags: Iterable[str] = (),
                      importance: int | None = None) -> Node | None:
        """Change one of the user's memories in place (checked like `remember`, re-embedded; its id,
        type and time kept, so what points at it, e.g. a rule's firings, still does); None when the
        user has no such memory."""
        spec = node_input(user_id, content, now=self.clock(), kind=kind, source=source, persistent=persistent,
                          extra_tags=extra_tags, importance=importance)
        vector = (await self.embed([spec.content]))[0]
        node = await self._write(lambda s: s.update(user_id, node_id, spec.content, spec.tags, spec.importance, vector))
        if node is not None:
            await self._read(lambda s: s.clear_index())
        return node

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

        query = NodeQuery(user_id, q, n, tuple(all_of), tuple(any_of), weights, self.clock(), self.half_life_h,
                          self.threads.embedder.cosine_floor, self.knn_candidates)
        results = await self._read(lambda s: best_nodes(s, query))
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

    async def rules(self, user_id: str, n: int = 100) -> list[Node]:
        """Every rule, the disabled ones (tagged `state:disabled`) too."""
        return await self.recent(user_id, n, all_of=("kind:rule", "persistent:true"))

    async def active_rules(self, user_id: str, n: int = 100) -> list[Node]:
        """The rules in force: not disabled."""
        return [r for r in await self.rules(user_id, n) if DISABLED not in r.tags]

    async def firings(self, user_id: str, rule_id: int, n: int = 10) -> list[Node]:
        """The alerts a rule raised (the rule engine writes each, tagged `alert:<rule id>`), newest first."""
        return await self.recent(user_id, n, all_of=(f"alert:{rule_id}",))

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
