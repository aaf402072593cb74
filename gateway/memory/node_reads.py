"""The reads of the memory stream that are the same SQL on both stores, written once.

`NodeReads` is the base of `MemoryStore` (SQLite, gateway/memory/store.py) and
`PostgresMemoryStore` (gateway/storage/memory_store.py). The two dialects differ only in what
`Dialect` holds (the placeholder, how a list of values is matched) and in how a store selects and
decodes its vectors (`_vector_column`, `_decode_vectors`); writes, the nearest-neighbour search
and the transactions stay with each store.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from gateway.memory.nodes import NODE_COLS, Node, node_from_row
from gateway.memory.schema import DIMS


class Connection(Protocol):
    """What the reads use of a DB-API connection (apsw's and psycopg's both have it)."""

    def execute(self, sql: str, args: Sequence[Any] = ...) -> Any: ...


@dataclass(frozen=True)
class Dialect:
    placeholder: str  # "?" (SQLite) or "%s" (psycopg)
    in_list: Callable[[list], tuple[str, list]]  # values -> (the SQL after the column, its args)


SQLITE = Dialect("?", lambda values: (f"IN ({','.join('?' * len(values))})", list(values)))
POSTGRES = Dialect("%s", lambda values: ("= ANY(%s)", [list(values)]))


def tag_clause(all_of: Iterable[str], any_of: Iterable[str], p: str) -> tuple[str, list]:
    """` AND id IN (...)` conditions (placeholder `p`): the node has every tag of `all_of` and at
    least one of `any_of`; `ns:*` matches any value of a namespace (a range on the tag index:
    ';' sorts right after ':', byte-wise, the PostgreSQL column sorting in "C")."""

    def match(tag: str) -> tuple[str, list[str]]:
        if tag.endswith(":*"):
            prefix = tag[:-1]
            return f"(tag >= {p} AND tag < {p})", [prefix, prefix[:-1] + ";"]
        return f"tag = {p}", [tag]

    sql, args = "", []
    for tag in all_of:
        cond, a = match(tag)
        sql += f" AND id IN (SELECT node_id FROM node_tags WHERE {cond})"
        args.extend(a)
    parts = [match(t) for t in any_of]
    if parts:
        sql += f" AND id IN (SELECT node_id FROM node_tags WHERE {' OR '.join(c for c, _ in parts)})"
        args.extend(x for _, a in parts for x in a)
    return sql, args


class NodeReads:
    """The reads both stores share; a store sets `conn` and `dialect` in its __init__."""

    conn: Connection
    dialect: Dialect
    _vector_column = "embedding"  # the SELECT expression of a node's vector

    def _decode_vectors(self, blobs: list) -> np.ndarray:
        """float32 (n, DIMS) from the selected `_vector_column` values (n >= 1)."""
        raise NotImplementedError

    def cursor(self, name: str) -> int | None:
        row = self.conn.execute(f"SELECT position FROM feed_cursors WHERE name = {self.dialect.placeholder}",
                                (name,)).fetchone()
        return None if row is None else int(row[0])

    def meta(self, key: str) -> str | None:
        row = self.conn.execute(f"SELECT value FROM meta WHERE key = {self.dialect.placeholder}", (key,)).fetchone()
        return row[0] if row else None

    def profile(self, user_id: str) -> dict:
        row = self.conn.execute("SELECT portrait, extra_info, updated FROM profiles WHERE user_id = "
                                f"{self.dialect.placeholder}", (user_id,)).fetchone()
        portrait, extra, updated = row if row else ("", "", None)
        return {"user_id": user_id, "portrait": portrait, "extra_info": extra, "updated": updated}

    def count(self, user_id: str | None = None) -> int:
        if user_id is None:
            return self.conn.execute("SELECT count(*) FROM nodes").fetchone()[0]
        return self.conn.execute(f"SELECT count(*) FROM nodes WHERE user_id = {self.dialect.placeholder}",
                                 (user_id,)).fetchone()[0]

    def users(self) -> list[str]:
        return [r[0] for r in self.conn.execute("SELECT DISTINCT user_id FROM nodes ORDER BY user_id")]

    def get(self, ids: Iterable[int]) -> list[Node]:
        ids = list(ids)
        if not ids:
            return []
        cond, args = self.dialect.in_list(ids)
        return [node_from_row(r) for r in self.conn.execute(f"SELECT {NODE_COLS} FROM nodes WHERE id {cond}", args)]

    def recent(self, user_id: str, n: int, *, all_of: Iterable[str] = (), any_of: Iterable[str] = (),
               types: Iterable[str] = (), since: float | None = None, until: float | None = None) -> list[Node]:
        p = self.dialect.placeholder
        sql, args = tag_clause(all_of, any_of, p)
        types = list(types)
        if types:
            cond, a = self.dialect.in_list(types)
            sql += f" AND type {cond}"
            args.extend(a)
        if since is not None:
            sql += f" AND ts >= {p}"
            args.append(since)
        if until is not None:
            sql += f" AND ts < {p}"
            args.append(until)
        rows = self.conn.execute(f"SELECT {NODE_COLS} FROM nodes WHERE user_id = {p}{sql} "
                                 f"ORDER BY ts DESC, id DESC LIMIT {p}", (user_id, *args, n))
        return [node_from_row(r) for r in rows]

    def filtered_ids(self, user_id: str, all_of: Iterable[str], any_of: Iterable[str], limit: int) -> list[int]:
        p = self.dialect.placeholder
        sql, args = tag_clause(all_of, any_of, p)
        rows = self.conn.execute(f"SELECT id FROM nodes WHERE user_id = {p}{sql} ORDER BY ts DESC LIMIT {p}",
                                 (user_id, *args, limit))
        return [r[0] for r in rows]

    def score_rows(self, ids: list[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(ids, vectors (k, 384), importance, last_retrieved, ts) of the given nodes, for scoring."""
        rows = []
        if ids:
            cond, args = self.dialect.in_list(ids)
            rows = self.conn.execute(f"SELECT id, {self._vector_column}, importance, last_retrieved, ts FROM nodes"
                                     f" WHERE id {cond}", args).fetchall()
        if not rows:
            return np.zeros(0, np.int64), np.zeros((0, DIMS), np.float32), *(np.zeros(0) for _ in range(3))
        vecs = self._decode_vectors([r[1] for r in rows])
        cols = np.array([(r[2], r[3], r[4]) for r in rows], np.float64)
        return np.array([r[0] for r in rows], np.int64), vecs, cols[:, 0], cols[:, 1], cols[:, 2]

    def vectors(self, ids: list[int]) -> dict[int, np.ndarray]:
        if not ids:
            return {}
        cond, args = self.dialect.in_list(ids)
        rows = self.conn.execute(f"SELECT id, {self._vector_column} FROM nodes WHERE id {cond}", args).fetchall()
        if not rows:
            return {}
        return {r[0]: v for r, v in zip(rows, self._decode_vectors([r[1] for r in rows]))}

    def iter_nodes(self, user_id: str | None = None, batch: int = 1000) -> Iterator[list[Node]]:
        """Every node (of one user, or all), oldest id first, in batches."""
        p = self.dialect.placeholder
        last = 0
        where = "" if user_id is None else f" AND user_id = {p}"
        while True:
            args = (last,) if user_id is None else (last, user_id)
            rows = self.conn.execute(f"SELECT {NODE_COLS} FROM nodes WHERE id > {p}{where} ORDER BY id LIMIT {p}",
                                     (*args, batch)).fetchall()
            if not rows:
                return
            yield [node_from_row(r) for r in rows]
            last = rows[-1][0]

    def iter_all(self, batch: int = 256) -> Iterator[list[tuple[int, str]]]:
        p = self.dialect.placeholder
        last = 0
        while True:
            rows = self.conn.execute(f"SELECT id, content FROM nodes WHERE id > {p} ORDER BY id LIMIT {p}",
                                     (last, batch)).fetchall()
            if not rows:
                return
            yield rows
            last = rows[-1][0]
