"""The memory stream on PostgreSQL + pgvector: the NodeStore (gateway/memory/node_store.py) that
several gateways share.

One node = one row + its tags, written in one transaction. Vectors are `halfvec(384)` under an
HNSW index (inner product; m 16, ef_construction 64, gateway/storage/schema.py); `candidates`
asks it for the user's nearest nodes with pgvector's iterative scan (`relaxed_order`: the filter
on the user does not starve the result), `hnsw.ef_search` at least the number asked for. The
service rescores the candidates with their vectors (float16 precision, read in binary with
`halfvec_send`). Synchronous, one connection, used from one thread (like the SQLite store).
"""

from __future__ import annotations

import json

import numpy as np
import psycopg

from gateway.memory.node_reads import POSTGRES, NodeReads
from gateway.memory.nodes import NODE_COLS, Node, NodeDraft, new_node, node_from_row
from gateway.memory.schema import DIMS

EF_SEARCH_MIN = 64


def vector_literal(vec: np.ndarray) -> str:
    """pgvector's text form '[x,y,...]' of a float vector."""
    vec = np.ascontiguousarray(vec, np.float32)
    if vec.shape != (DIMS,):
        raise ValueError(f"embedding must have {DIMS} dims, got {vec.shape}")
    return "[" + ",".join(map(repr, vec.tolist())) + "]"


def halfvec_array(blobs: list[bytes]) -> np.ndarray:
    """float32 (n, dims) from halfvec_send() values: int16 dims, int16 unused, big-endian float16s."""
    if not blobs:
        return np.zeros((0, DIMS), np.float32)
    return np.stack([np.frombuffer(b, ">f2", offset=4) for b in blobs]).astype(np.float32)


class PostgresMemoryStore(NodeReads):
    _vector_column = "halfvec_send(embedding)"

    def __init__(self, dsn: str, connect_timeout_s: float = 5.0) -> None:
        self.conn = psycopg.connect(dsn, autocommit=True, connect_timeout=max(1, round(connect_timeout_s)))
        self.dialect = POSTGRES
        self.conn.execute("SET hnsw.iterative_scan = relaxed_order")
        self._ef_search = EF_SEARCH_MIN
        self.conn.execute(f"SET hnsw.ef_search = {self._ef_search}")

    def close(self) -> None:
        self.conn.close()

    # --- writes -------------------------------------------------------------------------------
    def insert(self, draft: NodeDraft, now: float) -> Node:
        return self.insert_many([draft], now)[0]

    def insert_many(self, drafts: list[NodeDraft], now: float, cursor: tuple[str, int] | None = None) -> list[Node]:
        """The nodes with their tags and, when given, a feed's cursor commit together or not at all."""
        literals = [vector_literal(d.embedding) for d in drafts]
        nodes = []
        with self.conn.transaction(), self.conn.cursor() as cur:
            for draft, vec in zip(drafts, literals):
                cur.execute(
                    "INSERT INTO nodes (user_id, type, content, importance, ts, created, last_retrieved, pointer_ids,"
                    " tags, embedding) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING id",
                    (draft.user_id, draft.type, draft.content, draft.importance, draft.ts, now, now,
                     json.dumps(list(draft.pointer_ids)), json.dumps(list(draft.tags)), vec))
                node_id = cur.fetchone()[0]
                if draft.tags:
                    cur.executemany("INSERT INTO node_tags (tag, node_id) VALUES (%s, %s)",
                                    [(t, node_id) for t in draft.tags])
                nodes.append(new_node(draft, node_id, now))
            if cursor is not None:
                self._set_cursor(cur, *cursor)
        return nodes

    @staticmethod
    def _set_cursor(cur: psycopg.Cursor, name: str, position: int) -> None:
        cur.execute("INSERT INTO feed_cursors (name, position) VALUES (%s, %s) "
                    "ON CONFLICT (name) DO UPDATE SET position = excluded.position", (name, position))

    def set_cursor(self, name: str, position: int) -> None:
        with self.conn.transaction(), self.conn.cursor() as cur:
            self._set_cursor(cur, name, position)

    def touch(self, ids: list[int], now: float) -> None:
        if ids:
            self.conn.execute("UPDATE nodes SET last_retrieved = %s WHERE id = ANY(%s)", (now, list(ids)))

    def set_embeddings(self, items: list[tuple[int, np.ndarray]]) -> None:
        with self.conn.transaction(), self.conn.cursor() as cur:
            cur.executemany("UPDATE nodes SET embedding = %s WHERE id = %s",
                            [(vector_literal(vec), node_id) for node_id, vec in items])

    def delete(self, user_id: str, node_id: int) -> bool:
        """Delete one node of `user_id` (its tags go with it); False when the user has no such node."""
        return self.conn.execute("DELETE FROM nodes WHERE id = %s AND user_id = %s", (node_id, user_id)).rowcount == 1

    def update(self, user_id: str, node_id: int, content: str, tags: tuple[str, ...], importance: int,
               embedding: np.ndarray) -> Node | None:
        vec = vector_literal(embedding)
        with self.conn.transaction(), self.conn.cursor() as cur:
            cur.execute(f"UPDATE nodes SET content = %s, tags = %s, importance = %s, embedding = %s"
                        f" WHERE id = %s AND user_id = %s RETURNING {NODE_COLS}",
                        (content, json.dumps(list(tags)), importance, vec, node_id, user_id))
            row = cur.fetchone()
            if row is None:
                return None
            cur.execute("DELETE FROM node_tags WHERE node_id = %s", (node_id,))
            if tags:
                cur.executemany("INSERT INTO node_tags (tag, node_id) VALUES (%s, %s)", [(t, node_id) for t in tags])
        return node_from_row(row)

    def set_meta(self, key: str, value: str) -> None:
        self.conn.execute("INSERT INTO meta (key, value) VALUES (%s, %s) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                          (key, value))

    def set_profile(self, user_id: str, now: float, portrait: str | None = None, extra_info: str | None = None) -> None:
        with self.conn.transaction():
            self.conn.execute("INSERT INTO profiles (user_id) VALUES (%s) ON CONFLICT DO NOTHING", (user_id,))
            if portrait is not None:
                self.conn.execute("UPDATE profiles SET portrait = %s, updated = %s WHERE user_id = %s",
                                  (portrait, now, user_id))
            if extra_info is not None:
                self.conn.execute("UPDATE profiles SET extra_info = %s, updated = %s WHERE user_id = %s",
                                  (extra_info, now, user_id))

    # --- reads (the shared ones: gateway/memory/node_reads.py) -----------------------------------
    def _decode_vectors(self, blobs: list) -> np.ndarray:
        return halfvec_array([bytes(b) for b in blobs])

    def candidates(self, user_id: str, query: np.ndarray, k: int) -> list[int]:
        """The HNSW index's k nearest nodes of `user_id` by inner product."""
        ef = max(EF_SEARCH_MIN, k)
        if ef != self._ef_search:
            self.conn.execute(f"SET hnsw.ef_search = {int(ef)}")
            self._ef_search = ef
        rows = self.conn.execute("SELECT id FROM nodes WHERE user_id = %s ORDER BY embedding <#> %s::halfvec LIMIT %s",
                                 (user_id, vector_literal(query), k))
        return [r[0] for r in rows]

    def clear_index(self) -> None:
        """Nothing cached: the HNSW index follows every commit."""
