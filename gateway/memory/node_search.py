"""One search in the memory stream, run on the reader's thread: the candidates, then the exact score.

The candidates are the store's nearest nodes to the query (the binary codes on SQLite, the HNSW
index on PostgreSQL) plus the user's most recent nodes (so recency can win), or, with tag
filters, every node that passes them (newest first, bounded); they are scored with the exact
float cosine (gateway/memory/retrieval.py) and the n best returned as `Scored`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gateway.memory.node_store import NodeStore
from gateway.memory.retrieval import Scored, Weights, score_arrays

FILTERED_MAX = 5000  # nodes scored at most when tag filters choose the candidates
RECENT_CANDIDATES = 20  # the user's newest nodes, candidates beside the nearest ones


@dataclass(frozen=True)
class NodeQuery:
    user_id: str
    vector: np.ndarray  # unit length
    n: int
    all_of: tuple[str, ...]
    any_of: tuple[str, ...]
    weights: Weights
    now: float
    half_life_h: float
    cosine_floor: float
    knn_candidates: int


def best_nodes(store: NodeStore, q: NodeQuery) -> list[Scored]:
    if q.all_of or q.any_of:
        ids = store.filtered_ids(q.user_id, q.all_of, q.any_of, limit=FILTERED_MAX)
    else:
        ids = store.candidates(q.user_id, q.vector, max(q.knn_candidates, 10 * q.n))
        ids += [node.id for node in store.recent(q.user_id, RECENT_CANDIDATES)]
    node_ids, vecs, importance, last, ts = store.score_rows(list(dict.fromkeys(ids)))
    order, scores, rel = score_arrays(vecs, importance, last, ts, q.vector, q.weights, q.now, q.half_life_h,
                                      q.cosine_floor)
    top = order[:q.n]
    nodes = {node.id: node for node in store.get(node_ids[top].tolist())}
    return [Scored(nodes[int(node_ids[i])], float(scores[i]), float(rel[i])) for i in top]
