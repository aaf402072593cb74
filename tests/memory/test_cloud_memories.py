"""With the memory on, the LLM brain gets the user's relevant memories in its system prompt, the
memory still answers first when it can, and LLM turns are remembered."""

from __future__ import annotations

from datetime import datetime, timezone

from gateway.brain.cloud import CloudBrain
from gateway.brain.llm import LlmProvider
from gateway.config import LlmProviderConfig
from gateway.brain.memory import MemoryBrain
from gateway.brain.contract import BrainContext
from gateway.brain.scripted import Script, ScriptedLlm
from tests.brain.test_cloud_brain import ask, local

CTX = BrainContext("box-anna", datetime(2026, 3, 1, 9, 30, tzinfo=timezone.utc))


async def test_relevant_memories_reach_the_llm_and_the_llm_turn_is_remembered(memory) -> None:
    await memory.remember("anna", "Anna's daughter Lisa lives in Berlin and visits every Sunday.", kind="fact",
                          persistent=True)
    await memory.remember("anna", "The kitchen window was repaired last week.", kind="fact")
    async with ScriptedLlm([Script(["Bring flowers for Lisa."])]) as llm:
        remembering = MemoryBrain(local(), memory)
        brain = CloudBrain(local(), [LlmProvider(LlmProviderConfig(name="a", base_url=llm.url, model="m"))],
                           memory=remembering, system_prompt="Persona.")
        said = [s.speech async for s in ask(brain, "what gift should I prepare for my daughter's visit", CTX)]
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
        await anext(ask(brain, "my name is Anna", CTX))
        assert [s.speech async for s in ask(brain, "what is my name", CTX)] == ["Your name is Anna."]
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
        assert [s.speech async for s in ask(brain, "tell me something about my health", CTX)] == ["It was 128 over 82."]
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
        session = brain.session("box-anna")
        # The speaker synthesizes ahead of playback: the whole reply is handed over...
        assert [s.speech async for s in session.reply("tell me a story", playing)] == [
            "Once upon a time.", "There was a king.", "The end."]
        await remembering.drain()
        assert await memory.recent("anna", 5, types=["conversation"]) == []  # ...but nothing was played yet
        session.spoken("Once upon a time.")  # the user barged in during the first sentence
        # A reply played to the end is remembered whole.
        assert [s.speech async for s in session.reply("a short one please", playing)] == ["A short one."]
        session.spoken("A short one.")
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
        session = brain.session("box-anna")
        assert [s.speech async for s in session.reply("tell me a story", playing)] == ["Once upon a time."]
        session.spoken("")
        await remembering.drain()
        assert await memory.recent("anna", 5, types=["conversation"]) == []
        await brain.close()


async def test_in_a_running_gateway_a_barge_in_leaves_only_the_played_sentences_in_the_memory(
        tmp_path, fake_runner, embedder) -> None:
    import asyncio

    from firmware_protocol import AudioChunk, Hello, ReplyText, TextInput, Welcome
    from gateway.app import Gateway
    from gateway.brain.factory import drain_brain
    from gateway.config import parse_config
    from gateway.links.memory import MemoryLink
    from gateway.memory.service import MemoryService
    from tests.conftest import ROOT

    story = ["Once upon a time there was a small robot. ", "It lived in a big house with many rooms. ",
             "Every day it cleaned all the floors. ", "And then it went to sleep."]
    async with ScriptedLlm([Script(story), Script(["Then it woke up."])]) as llm:
        cfg = parse_config({"devices": {"database": str(tmp_path / "gw.db")},
                            "memory": {"path": str(tmp_path / "memory.db"), "users": {"box-anna": "anna"}},
                            "brain": {"providers": [{"name": "scripted", "base_url": llm.url, "model": "m"}]}}, ROOT)
        memory = MemoryService(cfg.path(cfg.memory.path), lambda: embedder, users=cfg.memory.users)
        link = MemoryLink()
        gateway = Gateway(cfg, fake_runner, [link], memory=memory)
        ready = asyncio.Event()
        task = asyncio.create_task(gateway.serve(ready))
        try:
            await asyncio.wait_for(ready.wait(), 10)
            dev = link.connect()
            await dev.send(Hello(device_id="box-anna"))
            assert isinstance(await asyncio.wait_for(dev.receive(), 10), Welcome)
            await dev.send(TextInput(text="tell me a story about a robot"))
            while not isinstance(await asyncio.wait_for(dev.receive(), 10), AudioChunk):
                pass
            await asyncio.wait_for(llm.served.wait(), 10)  # the whole story is with the TTS by now
            await dev.send(TextInput(text="and what happened next"))  # the user speaks over it
            while not ((msg := await asyncio.wait_for(dev.receive(), 10)) and isinstance(msg, ReplyText)
                       and msg.final and msg.text == "Then it woke up."):
                pass
            await drain_brain(gateway.brain)
            turns = {t.content for t in await memory.recent("anna", 5, types=["conversation"])}
            played = {f"User: tell me a story about a robot\nAssistant: {story[0].strip()}",
                      f"User: tell me a story about a robot\nAssistant: {(story[0] + story[1]).strip()}"}
            assert len(turns & played) == 1, turns
            assert "User: and what happened next\nAssistant: Then it woke up." in turns
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
