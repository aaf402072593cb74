"""Retrieval scoring (pure functions): the seed's recency + relevance + importance.

score = w_recency * 0.5 ** (hours since last retrieved / half_life)
      + w_relevance * max(cosine(query, node) - floor, 0) / (1 - floor)   (floor: per model, 0 for MiniLM)
      + w_importance * importance / 10

Candidates come from the search (gateway/memory/node_search.py): the store's nearest nodes, plus
the most recent ones (so recency can win), or, with tag filters, every node that passes the
filters (newest first, bounded); they are scored here with the exact float cosine.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from gateway.memory.nodes import Node


@dataclass(frozen=True)
class Weights:
    recency: float
    relevance: float
    importance: float


@dataclass(frozen=True)
class Scored:
    node: Node
    score: float
    relevance: float

    def as_dict(self) -> dict:
        return {**self.node.as_dict(), "score": round(self.score, 4), "relevance": round(self.relevance, 4)}


def score_arrays(vecs: np.ndarray, importance: np.ndarray, last_retrieved: np.ndarray, ts: np.ndarray,
                 query: np.ndarray, weights: Weights, now: float, half_life_h: float,
                 cosine_floor: float = 0.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Score candidate nodes given as arrays; returns (order best first, scores, cosines).
    Ties go to the newer node. Relevance in the score is the cosine rescaled from the model's
    `cosine_floor` (where unrelated texts sit) to 1."""
    rel = vecs @ query
    recency = 0.5 ** (np.maximum(now - last_retrieved, 0.0) / 3600 / half_life_h)
    scaled = np.maximum(rel - cosine_floor, 0.0) / (1.0 - cosine_floor)
    scores = weights.recency * recency + weights.relevance * scaled + weights.importance * importance / 10
    return np.lexsort((-ts, -scores)), scores, rel


def group_by_type(results: Sequence[Scored], per_type: int = 10) -> dict[str, list[Scored]]:
    """{'observation': [...], 'conversation': [...], 'reflection': [...]}, best first, capped."""
    groups: dict[str, list[Scored]] = {"observation": [], "conversation": [], "reflection": []}
    for r in results:
        bucket = groups.setdefault(r.node.type, [])
        if len(bucket) < per_type:
            bucket.append(r)
    return groups
