"""`gateway bench-memory`: search latency and recall@10 at 10k and 100k nodes, write throughput.

Method (printed with the figures):
- write throughput: `MemoryService.remember` end to end (importance, MiniLM embedding, one
  transaction with row + tags + vector), real sentences, one at a time;
- search at N nodes: N distinct sentences (who x did what x when x where, 100,800 combinations,
  so many near-duplicates like a real memory stream) embedded with MiniLM and bulk-inserted;
- queries: 100 questions from templates in other words ("what did Anna do on Sunday?"),
  embedded; latency of `search_by_vector` (candidates from the binary-code index + exact
  rescoring + score; the 1-3 ms query embedding is reported apart);
- recall@10: the relevance-only top-10 against exact brute-force cosine over all N vectors.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from gateway.memory.retrieval import Weights
from gateway.memory.service import MemoryService

USER = "bench"
_WHO = ["Anna", "Ben", "grandpa Li", "grandma Wang", "the cat", "my daughter", "my son", "the neighbour",
        "the doctor", "Mia", "Tom", "the nurse", "uncle Joe", "the postman", "the dog", "my wife", "my husband",
        "the plumber", "the teacher", "Lucy"]
_DID = ["measured blood pressure", "went for a walk", "cooked pasta", "watched the news", "called the pharmacy",
        "felt dizzy", "slept badly", "watered the plants", "took the medicine", "played chess", "fixed the light",
        "talked about the garden", "asked about the weather", "read a book", "baked bread", "cleaned the windows",
        "forgot the keys", "visited the market", "had a headache", "laughed a lot", "wrote a letter",
        "listened to music", "painted the fence", "lost the remote", "drank too much coffee", "fed the birds",
        "complained about the noise", "went to the dentist", "sang a song", "repaired the bicycle"]
_WHEN = ["this morning", "in the evening", "on Sunday", "after lunch", "at night", "yesterday", "last week",
         "on Monday", "before breakfast", "at noon", "on Friday", "in the afternoon", "at dawn", "on the weekend"]
_WHERE = ["at home", "in the kitchen", "in the garden", "at the park", "in the living room", "at the clinic",
          "in town", "on the balcony", "at the shop", "in the bedroom", "by the lake", "at the station"]
_ASK = ["what did {who} do {when}?", "who {did} {where}?", "when did {who} last {verb}?",
        "tell me about {who} {where}", "did anyone {verb} {when}?", "what happened {where} {when}?"]


_VERB = dict(zip(
    "measured went cooked watched called felt slept watered took played fixed talked asked read baked cleaned "
    "forgot visited had laughed wrote listened painted lost drank fed complained sang repaired".split(),
    "measure go cook watch call feel sleep water take play fix talk ask read bake clean forget visit have laugh "
    "write listen paint lose drink feed complain sing repair".split()))


def make_questions(count: int, rng: np.random.Generator) -> list[str]:
    """`count` questions in other words than the stored sentences (slots drawn at random)."""
    out = []
    for _ in range(count):
        did = _DID[rng.integers(len(_DID))]
        out.append(_ASK[rng.integers(len(_ASK))].format(
            who=_WHO[rng.integers(len(_WHO))], did=did, verb=_VERB[did.split(" ", 1)[0]],
            when=_WHEN[rng.integers(len(_WHEN))], where=_WHERE[rng.integers(len(_WHERE))]))
    return out


def make_sentences(count: int, rng: np.random.Generator) -> list[str]:
    """`count` distinct sentences drawn from 20 x 30 x 14 x 12 = 100,800 combinations."""
    combos = list(itertools.product(_WHO, _DID, _WHEN, _WHERE))
    pick = rng.permutation(len(combos))[:count]
    return [" ".join(combos[i]) for i in pick]


def _pct(values: list[float], p: float) -> float:
    return float(np.percentile(np.array(values), p))


def _bulk_fill(memory: MemoryService, vectors: np.ndarray, start: int) -> None:
    store = memory.threads.writer  # the benchmark fills through the writer's connection, in one transaction
    conn = store.conn
    with conn:
        for k, v in enumerate(vectors, start):
            conn.execute("INSERT INTO nodes(user_id, type, content, importance, ts, created, last_retrieved, embedding)"
                         " VALUES (?, 'observation', ?, ?, ?, ?, ?, ?)",
                         (USER, f"node {k}", int(k % 10), 1e9 + k, 1e9 + k, 1e9 + k, v.tobytes()))
            conn.execute("INSERT INTO node_vec(rowid, user_id, embedding) VALUES (?, ?, vec_quantize_binary(?))",
                         (conn.last_insert_rowid(), USER, v.tobytes()))


def _all_vectors(memory: MemoryService) -> tuple[np.ndarray, np.ndarray]:
    rows = memory.threads.reader.conn.execute("SELECT id, embedding FROM nodes WHERE user_id = ?", (USER,)).fetchall()
    return np.array([r[0] for r in rows]), np.stack([np.frombuffer(r[1], np.float32) for r in rows])


async def _measure(memory: MemoryService, queries: np.ndarray) -> dict:
    return await measure_search(memory, queries, *_all_vectors(memory))


async def measure_search(memory: MemoryService, queries: np.ndarray, ids: np.ndarray, matrix: np.ndarray) -> dict:
    """Search latency and recall@10 of `queries` against the exact top-10 over (ids, matrix)."""
    relevance_only = Weights(0.0, 1.0, 0.0)
    lat, recalls, exact_ms = [], [], []
    for q in queries:
        t = time.perf_counter()
        found = await memory.search_by_vector(USER, q, 10, weights=relevance_only, touch=False)
        lat.append((time.perf_counter() - t) * 1000)
        t = time.perf_counter()
        exact = set(ids[np.argsort(-(matrix @ q))[:10]].tolist())
        exact_ms.append((time.perf_counter() - t) * 1000)
        recalls.append(len(exact & {r.node.id for r in found}) / 10)
    return {"nodes": len(ids), "search_p50_ms": round(_pct(lat, 50), 2), "search_p95_ms": round(_pct(lat, 95), 2),
            "load_average_1m": round(os.getloadavg()[0], 2),  # other work on the machine inflates the figures
            "recall_at_10": round(float(np.mean(recalls)), 3), "numpy_exact_p50_ms": round(_pct(exact_ms, 50), 2)}


async def bench(embedder: Any, sizes: tuple[int, ...], writes: int, db_dir: Path, out=print,
                candidates: tuple[int, ...] = (200, 300)) -> dict:
    results: dict = {"method": __doc__.split("Method (printed with the figures):")[1].strip()}
    rng = np.random.default_rng(7)
    sentences = make_sentences(max(sizes), rng)
    async with MemoryService(db_dir / "bench.db", embedder) as memory:
        t = time.perf_counter()
        for text in sentences[:writes]:
            await memory.remember("writer", text)
        results["write_nodes_per_s"] = round(writes / (time.perf_counter() - t), 1)
        out(f"writes (embedding + transaction): {results['write_nodes_per_s']} nodes/s over {writes}")
        questions = make_questions(100, rng)
        t = time.perf_counter()
        queries = np.concatenate([await memory.embed_query([q]) for q in questions])
        results["query_embedding_ms"] = round((time.perf_counter() - t) * 1000 / len(queries), 2)
        filled = 0
        for size in sizes:
            t = time.perf_counter()
            batch = 256
            for i in range(filled, size, batch):
                vecs = await memory.embed(sentences[i:min(i + batch, size)])
                await asyncio.get_running_loop().run_in_executor(memory.threads.write_pool, _bulk_fill, memory, vecs, i)
            out(f"embedded and stored {size - filled} sentences in {time.perf_counter() - t:.1f} s")
            filled = size
            for k in candidates:
                memory.knn_candidates = k
                figures = await _measure(memory, queries)
                results[f"{size}@{k}"] = figures
                out(f"{size:>7} nodes, {k} candidates: search p50 {figures['search_p50_ms']} ms, "
                    f"p95 {figures['search_p95_ms']} ms, recall@10 {figures['recall_at_10']} "
                    f"(numpy exact p50 {figures['numpy_exact_p50_ms']} ms; load average {figures['load_average_1m']})")
        out(f"query embedding: {results['query_embedding_ms']} ms per query (add it for an end-to-end search)")
    return results


def run_bench_memory(cfg: Any, sizes: tuple[int, ...] = (10_000, 100_000), writes: int = 300,
                     as_json: bool = False) -> int:
    from gateway.engines.minilm_embed import MiniLmEmbedder
    from gateway.engines.store import ModelStore

    store = ModelStore(cfg)
    with tempfile.TemporaryDirectory(prefix="memory-bench-") as tmp:
        results = asyncio.run(bench(lambda: MiniLmEmbedder.from_store(store), sizes, writes, Path(tmp),
                                    out=(lambda line: None) if as_json else print))
    if as_json:
        print(json.dumps(results, indent=2))
    return 0
