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
from collections.abc import Iterable, Iterator

import numpy as np
import psycopg

from gateway.memory.schema import DIMS
from gateway.memory.store import Node, NodeDraft

_COLS = "id, user_id, type, content, importance, ts, created, last_retrieved, pointer_ids, tags"
EF_SEARCH_MIN = 64


def _node(row: tuple) -> Node:
    return Node(row[0], row[1], row[2], row[3], row[4], row[5], row[6], row[7],
                tuple(json.loads(row[8])), tuple(json.loads(row[9])))


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


def _match(tag: str) -> tuple[str, list[str]]:
    if tag.endswith(":*"):  # any value of a namespace: a byte range (the column sorts in "C")
        prefix = tag[:-1]
        return "(tag >= %s AND tag < %s)", [prefix, prefix[:-1] + ";"]
    return "tag = %s", [tag]


def _tag_clause(all_of: Iterable[str], any_of: Iterable[str]) -> tuple[str, list]:
    sql, args = "", []
    for tag in all_of:
        cond, a = _match(tag)
        sql += f" AND id IN (SELECT node_id FROM node_tags WHERE {cond})"
        args.extend(a)
    parts = [_match(t) for t in any_of]
    if parts:
        sql += f" AND id IN (SELECT node_id FROM node_tags WHERE {' OR '.join(c for c, _ in parts)})"
        args.extend(x for _, a in parts for x in a)
    return sql, args


class PostgresMemoryStore:
    def __init__(self, dsn: str, connect_timeout_s: float = 5.0) -> None:
        self.conn = psycopg.connect(dsn, autocommit=True, connect_timeout=max(1, round(connect_timeout_s)))
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
                nodes.append(Node(node_id, draft.user_id, draft.type, draft.content, draft.importance, draft.ts,
                                  now, now, draft.pointer_ids, draft.tags))
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

    def cursor(self, name: str) -> int | None:
        row = self.conn.execute("SELECT position FROM feed_cursors WHERE name = %s", (name,)).fetchone()
        return None if row is None else int(row[0])

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
                        f" WHERE id = %s AND user_id = %s RETURNING {_COLS}",
                        (content, json.dumps(list(tags)), importance, vec, node_id, user_id))
            row = cur.fetchone()
            if row is None:
                return None
            cur.execute("DELETE FROM node_tags WHERE node_id = %s", (node_id,))
            if tags:
                cur.executemany("INSERT INTO node_tags (tag, node_id) VALUES (%s, %s)", [(t, node_id) for t in tags])
        return _node(row)

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

    # --- reads --------------------------------------------------------------------------------
    def meta(self, key: str) -> str | None:
        row = self.conn.execute("SELECT value FROM meta WHERE key = %s", (key,)).fetchone()
        return row[0] if row else None

    def profile(self, user_id: str) -> dict:
        row = self.conn.execute("SELECT portrait, extra_info, updated FROM profiles WHERE user_id = %s",
                                (user_id,)).fetchone()
        portrait, extra, updated = row if row else ("", "", None)
        return {"user_id": user_id, "portrait": portrait, "extra_info": extra, "updated": updated}

    def count(self, user_id: str | None = None) -> int:
        if user_id is None:
            return self.conn.execute("SELECT count(*) FROM nodes").fetchone()[0]
        return self.conn.execute("SELECT count(*) FROM nodes WHERE user_id = %s", (user_id,)).fetchone()[0]

    def users(self) -> list[str]:
        return [r[0] for r in self.conn.execute("SELECT DISTINCT user_id FROM nodes ORDER BY user_id")]

    def get(self, ids: Iterable[int]) -> list[Node]:
        ids = list(ids)
        if not ids:
            return []
        return [_node(r) for r in self.conn.execute(f"SELECT {_COLS} FROM nodes WHERE id = ANY(%s)", (ids,))]

    def recent(self, user_id: str, n: int, *, all_of: Iterable[str] = (), any_of: Iterable[str] = (),
               types: Iterable[str] = (), since: float | None = None, until: float | None = None) -> list[Node]:
        sql, args = _tag_clause(all_of, any_of)
        types = list(types)
        if types:
            sql += " AND type = ANY(%s)"
            args.append(types)
        if since is not None:
            sql += " AND ts >= %s"
            args.append(since)
        if until is not None:
            sql += " AND ts < %s"
            args.append(until)
        rows = self.conn.execute(f"SELECT {_COLS} FROM nodes WHERE user_id = %s{sql} ORDER BY ts DESC, id DESC LIMIT %s",
                                 (user_id, *args, n))
        return [_node(r) for r in rows]

    def filtered_ids(self, user_id: str, all_of: Iterable[str], any_of: Iterable[str], limit: int) -> list[int]:
        sql, args = _tag_clause(all_of, any_of)
        rows = self.conn.execute(f"SELECT id FROM nodes WHERE user_id = %s{sql} ORDER BY ts DESC LIMIT %s",
                                 (user_id, *args, limit))
        return [r[0] for r in rows]

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

    def score_rows(self, ids: list[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(ids, vectors (k, 384), importance, last_retrieved, ts) of the given nodes, for scoring."""
        rows = self.conn.execute("SELECT id, halfvec_send(embedding), importance, last_retrieved, ts FROM nodes"
                                 " WHERE id = ANY(%s)", (list(ids),)).fetchall() if ids else []
        if not rows:
            return np.zeros(0, np.int64), np.zeros((0, DIMS), np.float32), *(np.zeros(0) for _ in range(3))
        vecs = halfvec_array([bytes(r[1]) for r in rows])
        cols = np.array([(r[2], r[3], r[4]) for r in rows], np.float64)
        return np.array([r[0] for r in rows], np.int64), vecs, cols[:, 0], cols[:, 1], cols[:, 2]

    def vectors(self, ids: list[int]) -> dict[int, np.ndarray]:
        if not ids:
            return {}
        rows = self.conn.execute("SELECT id, halfvec_send(embedding) FROM nodes WHERE id = ANY(%s)",
                                 (list(ids),)).fetchall()
        return {i: v for (i, _), v in zip(rows, halfvec_array([bytes(r[1]) for r in rows]))}

    def iter_nodes(self, user_id: str | None = None, batch: int = 1000) -> Iterator[list[Node]]:
        """Every node (of one user, or all), oldest id first, in batches."""
        last = 0
        where = "" if user_id is None else " AND user_id = %s"
        while True:
            args = (last,) if user_id is None else (last, user_id)
            rows = self.conn.execute(f"SELECT {_COLS} FROM nodes WHERE id > %s{where} ORDER BY id LIMIT %s",
                                     (*args, batch)).fetchall()
            if not rows:
                return
            yield [_node(r) for r in rows]
            last = rows[-1][0]

    def iter_all(self, batch: int = 256) -> Iterator[list[tuple[int, str]]]:
        last = 0
        while True:
            rows = self.conn.execute("SELECT id, content FROM nodes WHERE id > %s ORDER BY id LIMIT %s",
                                     (last, batch)).fetchall()
            if not rows:
                return
            yield rows
            last = rows[-1][0]
