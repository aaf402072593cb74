"""A memory node: the dataclasses both stores hand out, and a `nodes` row read into one.

Both stores (gateway/memory/store.py on SQLite, gateway/storage/memory_store.py on PostgreSQL)
keep the node in the same columns, `NODE_COLS`, with pointer ids and tags as JSON text.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np


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


NODE_COLS = "id, user_id, type, content, importance, ts, created, last_retrieved, pointer_ids, tags"


def node_from_row(row: tuple) -> Node:
    """The Node of a row selected as `NODE_COLS`."""
    return Node(row[0], row[1], row[2], row[3], row[4], row[5], row[6], row[7],
                tuple(json.loads(row[8])), tuple(json.loads(row[9])))


def new_node(draft: NodeDraft, node_id: int, now: float) -> Node:
    """The Node a draft became when it was inserted with `node_id` at `now`."""
    return Node(node_id, draft.user_id, draft.type, draft.content, draft.importance, draft.ts,
                now, now, draft.pointer_ids, draft.tags)
