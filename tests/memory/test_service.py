"""The memory service on a real SQLite + sqlite-vec database with the real MiniLM embeddings."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.memory.errors import MemoryInputError
from gateway.memory.schema import MIGRATIONS, open_db, schema_version
from gateway.memory.service import MemoryService


async def test_a_remembered_fact_is_found_by_a_question_with_other_words(memory: MemoryService) -> None:
    await memory.remember("anna", "Anna's granddaughter Mia visits every Sunday", kind="fact", source="user")
    await memory.remember("anna", "The kitchen light was switched on", kind="event", source="box-anna")
    await memory.remember("anna", "Anna likes chamomile tea before bed", kind="preference", persistent=True)
    results = await memory.search("anna", "when does her grandchild come to see her?", n=2)
    assert results[0].node.content.startswith("Anna's granddaughter Mia")


async def test_tags_are_normalised_on_write(memory: MemoryService) -> None:
    node = await memory.remember("anna", "x y z", kind="event", source="BP-Anna",
                                 extra_tags=["Domain: HomeCare", "date:2026-11-30", "symbol: my thing"])
    assert node.tags == ("date:2026-11-30", "domain:homecare", "kind:event", "source:bp-anna", "symbol:my_thing")


@pytest.mark.parametrize("kwargs, message", [
    ({"content": "  "}, "content must not be empty"),
    ({"content": "x", "kind": "gossip"}, "kind must be one of"),
    ({"content": "x", "extra_tags": ["no namespace"]}, "bad tag 'no namespace'"),
    ({"content": "x", "extra_tags": "domain:home"}, "must be a list"),
    ({"content": "x", "importance": 11}, "importance must be an integer 0-10"),
    ({"content": "x", "node_type": "dream"}, "node type must be one of"),
])
async def test_bad_input_is_refused_with_a_clear_message_and_nothing_is_written(
        memory: MemoryService, kwargs: dict, message: str) -> None:
    with pytest.raises(MemoryInputError, match=message):
        await memory.remember("anna", **kwargs)
    assert await memory.count() == 0


async def test_users_never_see_each_others_memories(memory: MemoryService) -> None:
    await memory.remember("anna", "Anna's blood pressure was 150/95 this morning", kind="event")
    await memory.remember("ben", "Ben walked 8000 steps today", kind="event")
    anna = await memory.search("anna", "steps walked and blood pressure", n=10)
    ben = await memory.search("ben", "steps walked and blood pressure", n=10)
    assert [r.node.user_id for r in anna] == ["anna"] and [r.node.user_id for r in ben] == ["ben"]
    assert memory.user_for("box-ben") == "ben" and memory.user_for("unknown-box") == "device.unknown-box"


async def test_tag_filters_are_all_of_and_any_of(memory: MemoryService) -> None:
    await memory.remember("anna", "reading one", kind="event", extra_tags=["domain:homecare", "reading:blood_pressure"])
    await memory.remember("anna", "reading two", kind="event", extra_tags=["domain:homecare", "reading:temperature"])
    await memory.remember("anna", "a quant event", kind="event", extra_tags=["domain:quant"])
    both = await memory.search("anna", "reading", all_of=["domain:homecare", "reading:temperature"])
    either = await memory.search("anna", "reading", any_of=["reading:blood_pressure", "domain:quant"])
    assert [r.node.content for r in both] == ["reading two"]
    assert sorted(r.node.content for r in either) == ["a quant event", "reading one"]


async def test_recency_weight_prefers_what_was_retrieved_lately(memory: MemoryService, clock) -> None:
    old = await memory.remember("anna", "Anna went to the market", importance=5)
    clock.advance(72 * 3600)
    new = await memory.remember("anna", "Anna went to the pharmacy", importance=5)
    by_recency = await memory.search("anna", "where did Anna go?", n=2, weights=memory.conversation_weights)
    assert by_recency[0].node.id == new.id and by_recency[1].node.id == old.id
    assert by_recency[0].score > by_recency[1].score


async def test_active_rules_are_the_persistent_rules_only(memory: MemoryService) -> None:
    await memory.remember("anna", "Measure blood pressure every morning before 9", kind="rule", persistent=True,
                          extra_tags=["domain:homecare", "schedule:daily"])
    await memory.remember("anna", "a one-off rule of thumb", kind="rule")
    rules = await memory.active_rules("anna")
    assert [r.content for r in rules] == ["Measure blood pressure every morning before 9"]


async def test_changing_the_embedding_model_re_embeds_every_node_with_progress(
        tmp_path: Path, embedder, clock) -> None:
    async with MemoryService(tmp_path / "m.db", lambda: embedder, clock=clock) as first:
        await first.remember("household", "the cat is called Tom")
    lines: list[str] = []

    class Renamed:
        name, dims, cosine_floor = "another-model", 384, 0.0

        def embed(self, texts):
            return embedder.embed(texts)

        embed_query = embed

    async with MemoryService(tmp_path / "m.db", Renamed, clock=clock, progress=lines.append) as second:
        assert (await second.search("household", "what is the cat's name?", n=1))[0].node.content == "the cat is called Tom"
    assert any("re-embedding 1 memories" in line for line in lines) and lines[-1].endswith("1/1")


def test_migrations_are_versioned_and_idempotent(tmp_path: Path) -> None:
    conn = open_db(tmp_path / "v.db")
    assert schema_version(conn) == len(MIGRATIONS)
    conn.close()
    conn = open_db(tmp_path / "v.db")  # opening again applies nothing and keeps the version
    assert schema_version(conn) == len(MIGRATIONS)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


async def test_the_candidate_codes_in_ram_are_the_bits_sqlite_vec_stores(memory: MemoryService, request) -> None:
    import numpy as np

    from gateway.memory.vector_index import _codes

    if "postgres" in request.node.callspec.id:
        pytest.skip("SQLite's own index (PostgreSQL's is pgvector's HNSW)")
    for text in ("one", "two three", "a longer sentence about the garden"):
        await memory.remember("anna", text)
    rows = memory.threads.reader.conn.execute(
        "SELECT n.embedding, v.embedding FROM nodes n JOIN node_vec v ON v.rowid = n.id").fetchall()
    for floats, bits in rows:
        assert _codes(np.frombuffer(floats, np.float32)[None, :])[0].tobytes() == bits


async def test_search_finds_the_exact_best_match_among_many_near_duplicates(memory: MemoryService) -> None:
    memory.knn_candidates = 5  # fewer candidates than nodes: the code index has to pick
    for k in range(30):
        await memory.remember("anna", f"reading number {k} of the kitchen thermometer")
    await memory.remember("anna", "the dog barked at the postman")
    [best] = await memory.search("anna", "a dog barking at the mail carrier", n=1)
    assert best.node.content == "the dog barked at the postman"


def test_doctor_checks_the_real_sqlite_path_apsw_with_sqlite_vec() -> None:
    from gateway.cli.doctor import _sqlite

    [check] = list(_sqlite())
    assert check.status == "OK" and "loads sqlite-vec v0.1" in check.what and "(apsw)" in check.what
