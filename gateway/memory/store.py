"""The memory stream on SQLite: one node = one row + its tags + its binary vector, written in
one transaction, so a crash leaves the node entirely there or entirely absent.

`MemoryStore` is synchronous and used from one thread only (the service gives the writer and
the reader their own store on their own thread; WAL lets them run side by side).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import apsw
import numpy as np

from gateway.memory.schema import DIMS, open_db
from gateway.memory.vector_index import CodeIndex


@dataclass(frozen=True)
class NodeDraft:
    """A node before it has an id: everything computed outside the write transaction."""

    user_id: str
    type: str
    content: str
    importance: int
    ts: float
    tags: tuple[str, ...]
    embedding: np.ndarray
    pointer_ids: tuple[int, ...] = ()


@dataclass(frozen=True)
class Node:
    id: int
    user_id: str
    type: str
    content: str
    importance: int
    ts: float
    created: float
    last_retrieved: float
    pointer_ids: tuple[int, ...]
    tags: tuple[str, ...]

    def as_dict(self) -> dict:
        return {"id": self.id, "type": self.type, "content": self.content, "importance": self.importance,
                "ts": self.ts, "created": self.created, "last_retrieved": self.last_retrieved,
                "pointer_ids": list(self.pointer_ids), "tags": list(self.tags), "user_id": self.user_id}


_COLS = "id, user_id, type, content, importance, ts, created, last_retrieved, pointer_ids, tags"


def _node(row: tuple) -> Node:
    return Node(row[0], row[1], row[2], row[3], row[4], row[5], row[6], row[7],
                tuple(json.loads(row[8])), tuple(json.loads(row[9])))


def _match(tag: str) -> tuple[str, str]:
    """`ns:*` matches any value of a namespace (prefix search on the tag index)."""
    if tag.endswith(":*"):
        prefix = tag[:-1]
        return "(tag >= ? AND tag < ?)", [prefix, prefix[:-1] + ";"]  # ';' sorts right after ':'
    return "tag = ?", [tag]


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


class MemoryStore:
    def __init__(self, path: Path | str) -> None:
        self.conn: apsw.Connection = open_db(path)
        self._index = CodeIndex()  # the reader's search index (binary codes in RAM), filled on first use

    def close(self) -> None:
        self.conn.close()

    # --- writes -------------------------------------------------------------------------------
    def insert(self, draft: NodeDraft, now: float) -> Node:
        return self.insert_many([draft], now)[0]

    def insert_many(self, drafts: list[NodeDraft], now: float, cursor: tuple[str, int] | None = None) -> list[Node]:
        """The nodes (each with its tags and vector) and, when given, a feed's cursor (name,
        position) commit together or not at all."""
        vecs = [np.ascontiguousarray(d.embedding, np.float32) for d in drafts]
        if bad := [v.shape for v in vecs if v.shape != (DIMS,)]:
            raise ValueError(f"embedding must have {DIMS} dims, got {bad[0]}")
        nodes = []
        with self.conn:
            cur = self.conn.cursor()
            for draft, vec in zip(drafts, vecs):
                cur.execute(
                    "INSERT INTO nodes(user_id, type, content, importance, ts, created, last_retrieved, "
                    "pointer_ids, tags, embedding) VALUES (?,?,?,?,?,?,?,?,?,?)",
                    (draft.user_id, draft.type, draft.content, draft.importance, draft.ts, now, now,
                     json.dumps(list(draft.pointer_ids)), json.dumps(list(draft.tags)), vec.tobytes()))
                node_id = self.conn.last_insert_rowid()
                cur.executemany("INSERT INTO node_tags(tag, node_id) VALUES (?, ?)", [(t, node_id) for t in draft.tags])
                cur.execute("INSERT INTO node_vec(rowid, user_id, embedding) VALUES (?, ?, vec_quantize_binary(?))",
                            (node_id, draft.user_id, vec.tobytes()))
                nodes.append(Node(node_id, draft.user_id, draft.type, draft.content, draft.importance, draft.ts,
                                  now, now, draft.pointer_ids, draft.tags))
            if cursor is not None:
                self.set_cursor(*cursor)
        return nodes

    def set_cursor(self, name: str, position: int) -> None:
        with self.conn:
            self.conn.execute("INSERT INTO feed_cursors(name, position) VALUES (?, ?) "
                              "ON CONFLICT(name) DO UPDATE SET position = excluded.position", (name, position))

    def cursor(self, name: str) -> int | None:
        row = self.conn.execute("SELECT position FROM feed_cursors WHERE name = ?", (name,)).fetchone()
        return None if row is None else int(row[0])

    def touch(self, ids: list[int], now: float) -> None:
        if ids:
            with self.conn:
                self.conn.execute(f"UPDATE nodes SET last_retrieved = ? WHERE id IN ({','.join('?' * len(ids))})",
                                  (now, *ids))

    def set_embeddings(self, items: list[tuple[int, np.ndarray]]) -> None:
        with self.conn:
            for node_id, vec in items:
                blob = np.ascontiguousarray(vec, np.float32).tobytes()
                self.conn.execute("UPDATE nodes SET embedding = ? WHERE id = ?", (blob, node_id))
                # vec0 refuses an UPDATE of a bit column from vec_quantize_binary(): replace the row
                user = self.conn.execute("SELECT user_id FROM nodes WHERE id = ?", (node_id,)).fetchone()[0]
                self.conn.execute("DELETE FROM node_vec WHERE rowid = ?", (node_id,))
                self.conn.execute("INSERT INTO node_vec(rowid, user_id, embedding) VALUES (?, ?, vec_quantize_binary(?))",
                                  (node_id, user, blob))

    def delete(self, user_id: str, node_id: int) -> bool:
        """Delete one node of `user_id` with its tags and vector; False when the user has no such node."""
        with self.conn:
            if self.conn.execute("SELECT 1 FROM nodes WHERE id = ? AND user_id = ?", (node_id, user_id)).fetchone() is None:
                return False
            self.conn.execute("DELETE FROM node_tags WHERE node_id = ?", (node_id,))
            self.conn.execute("DELETE FROM node_vec WHERE rowid = ?", (node_id,))
            self.conn.execute("DELETE FROM nodes WHERE id = ?", (node_id,))
        return True

    def update(self, user_id: str, node_id: int, content: str, tags: tuple[str, ...], importance: int,
               embedding: np.ndarray) -> Node | None:
        """Rewrite one node of `user_id` (content, tags, importance, vector) keeping its id and
        time, in one transaction; None when the user has no such node."""
        vec = np.ascontiguousarray(embedding, np.float32)
        if vec.shape != (DIMS,):
            raise ValueError(f"embedding must have {DIMS} dims, got {vec.shape}")
        with self.conn:
            if self.conn.execute("SELECT 1 FROM nodes WHERE id = ? AND user_id = ?", (node_id, user_id)).fetchone() is None:
                return None
            self.conn.execute("UPDATE nodes SET content = ?, tags = ?, importance = ?, embedding = ? WHERE id = ?",
                              (content, json.dumps(list(tags)), importance, vec.tobytes(), node_id))
            self.conn.execute("DELETE FROM node_tags WHERE node_id = ?", (node_id,))
            self.conn.executemany("INSERT INTO node_tags(tag, node_id) VALUES (?, ?)", [(t, node_id) for t in tags])
            self.conn.execute("DELETE FROM node_vec WHERE rowid = ?", (node_id,))  # (vec0: no UPDATE of a bit column)
            self.conn.execute("INSERT INTO node_vec(rowid, user_id, embedding) VALUES (?, ?, vec_quantize_binary(?))",
                              (node_id, user_id, vec.tobytes()))
            row = self.conn.execute(f"SELECT {_COLS} FROM nodes WHERE id = ?", (node_id,)).fetchone()
        return _node(row)

    def set_meta(self, key: str, value: str) -> None:
        with self.conn:
            self.conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, value))

    def set_profile(self, user_id: str, now: float, portrait: str | None = None, extra_info: str | None = None) -> None:
        with self.conn:
            self.conn.execute("INSERT OR IGNORE INTO profiles(user_id) VALUES (?)", (user_id,))
            if portrait is not None:
                self.conn.execute("UPDATE profiles SET portrait = ?, updated = ? WHERE user_id = ?", (portrait, now, user_id))
            if extra_info is not None:
                self.conn.execute("UPDATE profiles SET extra_info = ?, updated = ? WHERE user_id = ?", (extra_info, now, user_id))

    # --- reads --------------------------------------------------------------------------------
    def meta(self, key: str) -> str | None:
        row = self.conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def profile(self, user_id: str) -> dict:
        row = self.conn.execute("SELECT portrait, extra_info, updated FROM profiles WHERE user_id = ?",
                                (user_id,)).fetchone()
        portrait, extra, updated = row if row else ("", "", None)
        return {"user_id": user_id, "portrait": portrait, "extra_info": extra, "updated": updated}

    def count(self, user_id: str | None = None) -> int:
        if user_id is None:
            return self.conn.execute("SELECT count(*) FROM nodes").fetchone()[0]
        return self.conn.execute("SELECT count(*) FROM nodes WHERE user_id = ?", (user_id,)).fetchone()[0]

    def users(self) -> list[str]:
        return [r[0] for r in self.conn.execute("SELECT DISTINCT user_id FROM nodes ORDER BY user_id")]

    def get(self, ids: Iterable[int]) -> list[Node]:
        ids = list(ids)
        if not ids:
            return []
        rows = self.conn.execute(f"SELECT {_COLS} FROM nodes WHERE id IN ({','.join('?' * len(ids))})", ids)
        return [_node(r) for r in rows]

    def recent(self, user_id: str, n: int, *, all_of: Iterable[str] = (), any_of: Iterable[str] = (),
               types: Iterable[str] = (), since: float | None = None, until: float | None = None) -> list[Node]:
        sql, args = _tag_clause(all_of, any_of)
        types = list(types)
        if types:
            sql += f" AND type IN ({','.join('?' * len(types))})"
            args.extend(types)
        if since is not None:
            sql += " AND ts >= ?"
            args.append(since)
        if until is not None:
            sql += " AND ts < ?"
            args.append(until)
        rows = self.conn.execute(f"SELECT {_COLS} FROM nodes WHERE user_id = ?{sql} ORDER BY ts DESC, id DESC LIMIT ?",
                                 (user_id, *args, n))
        return [_node(r) for r in rows]

    def filtered_ids(self, user_id: str, all_of: Iterable[str], any_of: Iterable[str], limit: int) -> list[int]:
        sql, args = _tag_clause(all_of, any_of)
        rows = self.conn.execute(f"SELECT id FROM nodes WHERE user_id = ?{sql} ORDER BY ts DESC LIMIT ?",
                                 (user_id, *args, limit))
        return [r[0] for r in rows]

    def candidates(self, user_id: str, query: np.ndarray, k: int) -> list[int]:
        """Ids of (about) the k nodes of `user_id` nearest to the unit vector `query` (vector_index.py)."""
        return self._index.candidates(self.conn, user_id, query, k)

    def clear_index(self) -> None:
        self._index.clear()

    def knn_ids(self, user_id: str, query: np.ndarray, k: int) -> list[int]:
        """Candidates by Hamming distance on the binary-quantised vectors (fast, approximate)."""
        rows = self.conn.execute(
            "SELECT rowid FROM node_vec WHERE embedding MATCH vec_quantize_binary(?) AND k = ? AND user_id = ?",
            (np.ascontiguousarray(query, np.float32).tobytes(), k, user_id))
        return [r[0] for r in rows]

    def score_rows(self, ids: list[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(ids, vectors (k, 384), importance, last_retrieved, ts) of the given nodes, for scoring."""
        rows = self.conn.execute("SELECT id, embedding, importance, last_retrieved, ts FROM nodes WHERE id IN "
                                 f"({','.join('?' * len(ids))})", ids).fetchall() if ids else []
        if not rows:
            return np.zeros(0, np.int64), np.zeros((0, DIMS), np.float32), *(np.zeros(0) for _ in range(3))
        vecs = np.frombuffer(b"".join(r[1] for r in rows), np.float32).reshape(len(rows), -1)
        cols = np.array([(r[2], r[3], r[4]) for r in rows], np.float64)
        return np.array([r[0] for r in rows], np.int64), vecs, cols[:, 0], cols[:, 1], cols[:, 2]

    def vectors(self, ids: list[int]) -> dict[int, np.ndarray]:
        if not ids:
            return {}
        rows = self.conn.execute(f"SELECT id, embedding FROM nodes WHERE id IN ({','.join('?' * len(ids))})", ids)
        return {i: np.frombuffer(b, np.float32) for i, b in rows}

    def iter_nodes(self, user_id: str | None = None, batch: int = 1000) -> Iterator[list[Node]]:
        """Every node (of one user, or all), oldest id first, in batches."""
        last = 0
        where = "" if user_id is None else " AND user_id = ?"
        while True:
            args = (last,) if user_id is None else (last, user_id)
            rows = self.conn.execute(f"SELECT {_COLS} FROM nodes WHERE id > ?{where} ORDER BY id LIMIT ?",
                                     (*args, batch)).fetchall()
            if not rows:
                return
            yield [_node(r) for r in rows]
            last = rows[-1][0]

    def iter_all(self, batch: int = 256) -> Iterator[list[tuple[int, str]]]:
        last = 0
        while True:
            rows = self.conn.execute("SELECT id, content FROM nodes WHERE id > ? ORDER BY id LIMIT ?",
                                     (last, batch)).fetchall()
            if not rows:
                return
            yield rows
            last = rows[-1][0]
