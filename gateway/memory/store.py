"""The memory stream on SQLite: one node = one row + its tags + its binary vector, written in
one transaction, so a crash leaves the node entirely there or entirely absent.

`MemoryStore` is synchronous and used from one thread only (the service gives the writer and
the reader their own store on their own thread; WAL lets them run side by side).
"""

from __future__ import annotations

import json
from pathlib import Path

import apsw
import numpy as np

from gateway.memory.node_reads import SQLITE, NodeReads
from gateway.memory.nodes import NODE_COLS, Node, NodeDraft, new_node, node_from_row
from gateway.memory.schema import DIMS, open_db
from gateway.memory.vector_index import CodeIndex


class MemoryStore(NodeReads):
    def __init__(self, path: Path | str) -> None:
        self.conn: apsw.Connection = open_db(path)
        self.dialect = SQLITE
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
                nodes.append(new_node(draft, node_id, now))
            if cursor is not None:
                self.set_cursor(*cursor)
        return nodes

    def set_cursor(self, name: str, position: int) -> None:
        with self.conn:
            self.conn.execute("INSERT INTO feed_cursors(name, position) VALUES (?, ?) "
                              "ON CONFLICT(name) DO UPDATE SET position = excluded.position", (name, position))

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
            row = self.conn.execute(f"SELECT {NODE_COLS} FROM nodes WHERE id = ?", (node_id,)).fetchone()
        return node_from_row(row)

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

    # --- reads (the shared ones: gateway/memory/node_reads.py) -----------------------------------
    def _decode_vectors(self, blobs: list) -> np.ndarray:
        return np.frombuffer(b"".join(blobs), np.float32).reshape(len(blobs), -1)

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
