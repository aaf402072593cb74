"""`gateway bench-memory --postgres`: the memory's search on PostgreSQL + pgvector at 10k and 100k nodes.

Method (printed with the figures): as `gateway bench-memory` (gateway/memory/bench.py): N
distinct sentences embedded with MiniLM, 100 questions in other words, latency of
`MemoryService.search_by_vector` (here: pgvector's HNSW candidates over halfvec(384) with
iterative scan, their vectors read back, exact rescoring and score; the query embedding reported
apart), recall@10 of the relevance-only top-10 against exact brute-force cosine over all N float32
vectors. With `--composed` the N vectors are not N embeddings but the normalised sum of the
embeddings of the sentence's four parts (who, did what, when, where: 76 embeddings) plus a little
noise (sigma 0.02 per dimension): the same near-duplicate structure in minutes instead of the
hours 100k MiniLM embeddings take on a busy 2-core machine; recall is still against the exact
top-10 of those same vectors. The nodes are loaded with COPY, then the HNSW index (m 16, ef_construction 64) is built
(its build time printed). Runs in a temporary database on the server of the DSN in
$`storage.dsn_env` (needs CREATEDB), dropped at the end.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from typing import Any

import numpy as np
import psycopg
from psycopg import conninfo, sql

from gateway.memory.bench import _DID, _WHEN, _WHERE, _WHO, USER, make_questions, make_sentences, measure_search
from gateway.memory.service import MemoryService
from gateway.storage.memory_store import PostgresMemoryStore, vector_literal
from gateway.storage.schema import migrate

_INDEX = ("CREATE INDEX nodes_embedding ON nodes USING hnsw (embedding halfvec_ip_ops)"
          " WITH (m = 16, ef_construction = 64)")


def _copy_nodes(dsn: str, vectors: np.ndarray, start: int) -> None:
    with psycopg.connect(dsn) as conn, conn.cursor() as cur:
        with cur.copy("COPY nodes (user_id, type, content, importance, ts, created, last_retrieved, embedding)"
                      " FROM STDIN") as copy:
            for k, v in enumerate(vectors, start):
                copy.write_row((USER, "observation", f"node {k}", k % 10, 1e9 + k, 1e9 + k, 1e9 + k,
                                vector_literal(v)))


def _build_index(dsn: str) -> float:
    t = time.perf_counter()
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SET maintenance_work_mem = '512MB'")
        conn.execute("DROP INDEX IF EXISTS nodes_embedding")
        conn.execute(_INDEX)
        conn.execute("ANALYZE nodes")
    return time.perf_counter() - t


async def _composed(memory: MemoryService, sentences: list[str], rng: np.random.Generator) -> np.ndarray:
    """Unit vectors: the sum of each sentence's four parts' embeddings plus noise (see the method)."""
    parts = [*_WHO, *_DID, *_WHEN, *_WHERE]
    part_vec = dict(zip(parts, await memory.embed(parts)))
    out = np.zeros((len(sentences), len(next(iter(part_vec.values())))), np.float32)
    for i, text in enumerate(sentences):
        rest = text
        for group in (_WHO, _DID, _WHEN, _WHERE):  # the sentence is "who did when where"
            part = next(p for p in sorted(group, key=len, reverse=True) if rest.startswith(p))
            out[i] += part_vec[part]
            rest = rest[len(part):].lstrip()
    out += rng.normal(0, 0.02, out.shape).astype(np.float32)
    return out / np.linalg.norm(out, axis=1, keepdims=True)


async def bench_postgres(embedder: Any, sizes: tuple[int, ...], dsn: str, out=print,
                         candidates: tuple[int, ...] = (100, 200), composed: bool = False) -> dict:
    results: dict = {"method": __doc__.split("Method (printed with the figures):")[1].strip(), "composed": composed}
    rng = np.random.default_rng(7)
    sentences = make_sentences(max(sizes), rng)
    name = f"gateway_bench_{os.getpid()}"
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    bench_dsn = conninfo.make_conninfo(dsn, dbname=name)
    try:
        with psycopg.connect(bench_dsn) as conn:
            migrate(conn)
            conn.execute("DROP INDEX nodes_embedding")  # built after the bulk load, as a real import would
            conn.commit()
        memory = MemoryService(":postgres:", embedder, open_store=lambda: PostgresMemoryStore(bench_dsn))
        async with memory:
            questions = make_questions(100, rng)
            t = time.perf_counter()
            queries = np.concatenate([await memory.embed_query([q]) for q in questions])
            results["query_embedding_ms"] = round((time.perf_counter() - t) * 1000 / len(queries), 2)
            filled, chunks = 0, []
            for size in sizes:
                t = time.perf_counter()
                if composed:
                    all_vecs = await _composed(memory, sentences[filled:size], rng)
                for i in range(filled, size, 256):
                    vecs = (all_vecs[i - filled:min(i + 256, size) - filled] if composed
                            else await memory.embed(sentences[i:min(i + 256, size)]))
                    await asyncio.to_thread(_copy_nodes, bench_dsn, vecs, i)
                    chunks.append(vecs.astype(np.float32))
                out(f"{'composed' if composed else 'embedded'} and copied {size - filled} vectors in "
                    f"{time.perf_counter() - t:.1f} s")
                matrix = np.concatenate(chunks)
                build_s = await asyncio.to_thread(_build_index, bench_dsn)
                out(f"HNSW index over {size} nodes built in {build_s:.1f} s")
                filled = size
                ids = np.arange(1, size + 1)  # identity ids in insertion order
                for k in candidates:
                    memory.knn_candidates = k
                    figures = await measure_search(memory, queries, ids, matrix)
                    figures["hnsw_build_s"] = round(build_s, 1)
                    results[f"{size}@{k}"] = figures
                    out(f"{size:>7} nodes, {k} candidates: search p50 {figures['search_p50_ms']} ms, "
                        f"p95 {figures['search_p95_ms']} ms, recall@10 {figures['recall_at_10']} "
                        f"(load average {figures['load_average_1m']})")
            out(f"query embedding: {results['query_embedding_ms']} ms per query (add it for an end-to-end search)")
    finally:
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
    return results


def run_bench_memory_postgres(cfg: Any, dsn: str, sizes: tuple[int, ...] = (10_000, 100_000),
                              as_json: bool = False, composed: bool = False) -> int:
    from gateway.engines.minilm_embed import MiniLmEmbedder
    from gateway.engines.store import ModelStore

    store = ModelStore(cfg)
    results = asyncio.run(bench_postgres(lambda: MiniLmEmbedder.from_store(store), sizes, dsn,
                                         out=(lambda line: None) if as_json else print, composed=composed))
    if as_json:
        print(json.dumps(results, indent=2))
    return 0
