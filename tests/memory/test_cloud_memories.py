"""With the memory on, the LLM brain gets the user's relevant memories in its system prompt, the
memory still answers first when it can, and LLM turns are remembered."""

from __future__ import annotations

from datetime import datetime, timezone

from gateway.brain.cloud import CloudBrain
from gateway.brain.llm import LlmProvider
from gateway.config import LlmProviderConfig
from gateway.memory.recall import MemoryBrain
from gateway.voice.brain import BrainContext
from gateway.brain.scripted import Script, ScriptedLlm
from tests.brain.test_cloud_brain import local

CTX = BrainContext("box-anna", datetime(2026, 3, 1, 9, 30, tzinfo=timezone.utc))


async def test_relevant_memories_reach_the_llm_and_the_llm_turn_is_remembered(memory) -> None:
    await memory.remember("anna", "Anna's daughter Lisa lives in Berlin and visits every Sunday.", kind="fact",
                          persistent=True)
    await memory.remember("anna", "The kitchen window was repaired last week.", kind="fact")
    async with ScriptedLlm([Script(["Bring flowers for Lisa."])]) as llm:
        remembering = MemoryBrain(local(), memory)
        brain = CloudBrain(local(), [LlmProvider(LlmProviderConfig(name="a", base_url=llm.url, model="m"))],
                           memory=remembering, system_prompt="Persona.")
        said = [s async for s in brain.reply("what gift should I prepare for my daughter's visit", CTX)]
        assert said == ["Bring flowers for Lisa."]
        system = llm.requests[0]["messages"][0]
        assert system["role"] == "system" and system["content"].startswith("Persona.")
        assert "Lisa lives in Berlin" in system["content"]
        assert "kitchen window" not in system["content"]
        await remembering.drain()
        turns = await memory.recent("anna", 5, types=["conversation"])
        assert any("Bring flowers for Lisa." in t.content for t in turns)
        await brain.close()


async def test_what_the_memory_knows_is_answered_without_the_llm(memory) -> None:
    async with ScriptedLlm([Script(["never."])]) as llm:
        remembering = MemoryBrain(local(), memory)
        brain = CloudBrain(local(), [LlmProvider(LlmProviderConfig(name="a", base_url=llm.url, model="m"))],
                           memory=remembering)
        await anext(brain.reply("my name is Anna", CTX))
        assert [s async for s in brain.reply("what is my name", CTX)] == ["Your name is Anna."]
        assert llm.requests == []
        await remembering.drain()
        await brain.close()


async def test_the_llm_can_search_the_memory_with_the_memory_search_tool(memory) -> None:
    from gateway.brain.gateway_tools import memory_tools
    from gateway.brain.tools import Toolbox

    await memory.remember("anna", "Anna's blood pressure was 128/82 on Monday.", kind="fact")
    async with ScriptedLlm([Script(tool_calls=[("memory_search", '{"query": "blood pressure"}')]),
                            Script(["It was 128 over 82."])]) as llm:
        brain = CloudBrain(local(), [LlmProvider(LlmProviderConfig(name="a", base_url=llm.url, model="m"))],
                           tools=Toolbox(memory_tools(memory)))
        assert [s async for s in brain.reply("tell me something about my health", CTX)] == ["It was 128 over 82."]
        results = [m["content"] for m in llm.requests[1]["messages"] if m["role"] == "tool"]
        assert "128/82" in results[0]
        await brain.close()


async def test_after_a_barge_in_the_memory_keeps_only_the_part_of_the_llm_reply_that_was_played(memory) -> None:
    playing = BrainContext("box-anna", CTX.now, reports_playback=True)
    async with ScriptedLlm([Script(["Once upon a time. ", "There was a king. ", "The end."]),
                            Script(["A short one."])]) as llm:
        remembering = MemoryBrain(local(), memory)
        brain = CloudBrain(local(), [LlmProvider(LlmProviderConfig(name="a", base_url=llm.url, model="m"))],
                           memory=remembering)
        # The speaker synthesizes ahead of playback: the whole reply is handed over...
        assert [s async for s in brain.reply("tell me a story", playing)] == [
            "Once upon a time.", "There was a king.", "The end."]
        await remembering.drain()
        assert await memory.recent("anna", 5, types=["conversation"]) == []  # ...but nothing was played yet
        brain.spoken("box-anna", "Once upon a time.")  # the user barged in during the first sentence
        # A reply played to the end is remembered whole.
        assert [s async for s in brain.reply("a short one please", playing)] == ["A short one."]
        brain.spoken("box-anna", "A short one.")
        await remembering.drain()
        turns = sorted(t.content for t in await memory.recent("anna", 5, types=["conversation"]))
        assert turns == ["User: a short one please\nAssistant: A short one.",
                         "User: tell me a story\nAssistant: Once upon a time."]
        await brain.close()


async def test_a_reply_interrupted_before_any_of_it_was_played_is_not_remembered(memory) -> None:
    playing = BrainContext("box-anna", CTX.now, reports_playback=True)
    async with ScriptedLlm([Script(["Once upon a time."])]) as llm:
        remembering = MemoryBrain(local(), memory)
        brain = CloudBrain(local(), [LlmProvider(LlmProviderConfig(name="a", base_url=llm.url, model="m"))],
                           memory=remembering)
        assert [s async for s in brain.reply("tell me a story", playing)] == ["Once upon a time."]
        brain.spoken("box-anna", "")
        await remembering.drain()
        assert await memory.recent("anna", 5, types=["conversation"]) == []
        await brain.close()
