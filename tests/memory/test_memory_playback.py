"""The local memory brain keeps only what was played (like the LLM brain), and with
`brain.route: llm_first` an introduction answered by the LLM is still remembered."""

from __future__ import annotations

import asyncio
from datetime import datetime, timezone
from pathlib import Path

from gateway.brain.cloud import CloudBrain
from gateway.brain.llm import LlmProvider
from gateway.brain.scripted import Script, ScriptedLlm
from gateway.config import LlmProviderConfig
from gateway.brain.memory import MemoryBrain
from gateway.brain.contract import BrainContext
from tests.brain.test_cloud_brain import ask, local

CTX = BrainContext("box-anna", datetime(2026, 3, 1, 9, 30, tzinfo=timezone.utc))
PLAYING = BrainContext("box-anna", CTX.now, reports_playback=True)
STORY = ["Once upon a time there was a small robot.", "It lived in a big house with many rooms.",
         "Every day it cleaned all the floors.", "And then it went to sleep."]


def story_table(tmp_path: Path) -> Path:
    """A reply table whose story answer is long enough to be interrupted."""
    path = tmp_path / "replies.yaml"
    path.write_text('intents:\n  - name: story\n    keywords: ["tell me a story"]\n'
                    f'    answers:\n      - "{" ".join(STORY)}"\n', encoding="utf-8")
    return path


async def conversation(memory) -> list[str]:
    return sorted(t.content for t in await memory.recent("anna", 5, types=["conversation"]))


async def names(memory) -> list[str]:
    return [f.content for f in await memory.recent("anna", 5, all_of=["profile:name"])]


async def test_a_memory_brain_whose_reply_is_played_remembers_only_what_was_played(memory) -> None:
    brain = MemoryBrain(local(), memory)
    session = brain.session("box-anna")
    assert [s.speech async for s in session.reply("how are you", PLAYING)] == [
        "I am doing well, thank you for asking.", "How can I help you?"]
    await brain.drain()
    assert await conversation(memory) == []  # handed to the TTS, not played yet
    session.spoken("I am doing well, thank you for asking.")  # the user barged in
    assert [s.speech async for s in session.reply("hello", PLAYING)]
    session.spoken("")  # interrupted before anything was played: nothing to remember
    await brain.drain()
    assert await conversation(memory) == [
        "User: how are you\nAssistant: I am doing well, thank you for asking."]


async def test_a_memory_brain_whose_caller_does_not_report_playback_remembers_the_whole_reply(memory) -> None:
    brain = MemoryBrain(local(), memory)
    assert [s.speech async for s in ask(brain, "how are you", CTX)]
    await brain.drain()
    assert await conversation(memory) == [
        "User: how are you\nAssistant: I am doing well, thank you for asking. How can I help you?"]


async def test_with_llm_first_an_introduction_answered_by_the_llm_is_remembered(memory) -> None:
    async with ScriptedLlm([Script(["Lovely to meet you, Anna!"]), Script(["You are Anna."])]) as llm:
        remembering = MemoryBrain(local(), memory)
        brain = CloudBrain(local(), [LlmProvider(LlmProviderConfig(name="a", base_url=llm.url, model="m"))],
                           memory=remembering, route="llm_first")
        assert [s.speech async for s in ask(brain, "hi, my name is Anna", CTX)] == ["Lovely to meet you, Anna!"]
        await remembering.drain()
        assert await names(memory) == ["The user's name is Anna."]
        # The next LLM turn gets it among the user's memories.
        assert [s.speech async for s in ask(brain, "what is my name", CTX)] == ["You are Anna."]
        assert "The user's name is Anna." in llm.requests[1]["messages"][0]["content"]
        await brain.close()


async def test_with_llm_first_and_every_provider_down_an_introduction_is_answered_and_remembered_once(
        memory) -> None:
    async with ScriptedLlm([Script(mode="fail")]) as llm:
        remembering = MemoryBrain(local(), memory)
        brain = CloudBrain(local(), [LlmProvider(LlmProviderConfig(name="a", base_url=llm.url, model="m"))],
                           memory=remembering, route="llm_first")
        assert [s.speech async for s in ask(brain, "my name is Anna", CTX)] == ["Nice to meet you, Anna."]
        await remembering.drain()
        assert await names(memory) == ["The user's name is Anna."]
        await brain.close()


async def test_with_llm_first_a_withdrawn_introduction_is_not_remembered(memory) -> None:
    async with ScriptedLlm([Script(["Hello Ann!"])]) as llm:
        remembering = MemoryBrain(local(), memory)
        brain = CloudBrain(local(), [LlmProvider(LlmProviderConfig(name="a", base_url=llm.url, model="m"))],
                           memory=remembering, route="llm_first")
        session = brain.session("box-anna")
        early = session.reply("my name is Ann", PLAYING)  # asked on a speculative transcript...
        assert (await anext(early)).speech == "Hello Ann!"
        session.withdraw()  # ...the user went on: "my name is Annabelle"
        await early.aclose()
        await remembering.drain()
        assert await names(memory) == []
        await brain.close()


async def test_in_a_running_gateway_a_barge_in_leaves_only_the_played_part_of_a_local_reply_in_the_memory(
        tmp_path, fake_runner, embedder) -> None:
    from firmware_protocol import AudioChunk, Hello, ReplyText, TextInput, Welcome
    from gateway.app import Gateway
    from gateway.brain.factory import drain_brain
    from gateway.config import parse_config
    from gateway.links.memory import MemoryLink
    from gateway.memory.service import MemoryService
    from tests.conftest import ROOT

    cfg = parse_config({"devices": {"database": str(tmp_path / "gw.db")},
                        "memory": {"path": str(tmp_path / "memory.db"), "users": {"box-anna": "anna"}},
                        "brain": {"replies": str(story_table(tmp_path))}}, ROOT)
    memory = MemoryService(cfg.path(cfg.memory.path), lambda: embedder, users=cfg.memory.users)
    link = MemoryLink()
    gateway = Gateway(cfg, fake_runner, [link], memory=memory)
    assert isinstance(gateway.brain, MemoryBrain)
    ready = asyncio.Event()
    task = asyncio.create_task(gateway.serve(ready))
    try:
        await asyncio.wait_for(ready.wait(), 10)
        dev = link.connect()
        await dev.send(Hello(device_id="box-anna"))
        assert isinstance(await asyncio.wait_for(dev.receive(), 10), Welcome)
        await dev.send(TextInput(text="tell me a story"))
        while not isinstance(await asyncio.wait_for(dev.receive(), 10), AudioChunk):
            pass
        await dev.send(TextInput(text="how are you"))  # the user speaks over the story
        while not ((msg := await asyncio.wait_for(dev.receive(), 10)) and isinstance(msg, ReplyText)
                   and msg.final and msg.text == cfg.brain.fallback):
            pass
        await drain_brain(gateway.brain)
        turns = set(await conversation(memory))
        played = {f"User: tell me a story\nAssistant: {' '.join(STORY[:n])}" for n in (1, 2)}
        assert len(turns & played) == 1, turns
        assert f"User: tell me a story\nAssistant: {' '.join(STORY)}" not in turns
        assert f"User: how are you\nAssistant: {cfg.brain.fallback}" in turns
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def gated(memory, monkeypatch) -> asyncio.Event:
    """The memory's writes wait for the returned event (a slow board: the embedding and the insert
    take longer than the user's next turn)."""
    gate = asyncio.Event()
    remember = memory.remember

    async def slow_remember(*args, **kwargs):
        await gate.wait()
        return await remember(*args, **kwargs)

    monkeypatch.setattr(memory, "remember", slow_remember)
    return gate


async def test_the_next_answer_for_the_user_waits_for_the_name_still_being_written(memory, monkeypatch) -> None:
    """Found on an emulated Raspberry Pi: "my name is Anna", then at once "what is my name?" was
    answered before the introduction's background write had landed ("You have not told me...")."""
    gate = gated(memory, monkeypatch)
    brain = MemoryBrain(local(), memory)
    assert [s.speech async for s in brain.session("box-anna").reply("my name is Anna", PLAYING)]
    answer = asyncio.create_task(brain.answer("what is my name", CTX))
    other = asyncio.create_task(brain.answer("what is my name", BrainContext("box-ben", CTX.now)))
    await asyncio.wait_for(other, 10)  # another user's answer does not wait for Anna's write
    assert other.result().startswith("You have not told me your name")
    assert not answer.done()
    gate.set()
    assert await asyncio.wait_for(answer, 10) == "Your name is Anna."


async def test_an_answer_cancelled_while_it_waits_for_a_write_does_not_cancel_the_write(memory, monkeypatch) -> None:
    gate = gated(memory, monkeypatch)
    brain = MemoryBrain(local(), memory)
    assert [s.speech async for s in brain.session("box-anna").reply("my name is Anna", PLAYING)]
    answer = asyncio.create_task(brain.answer("what is my name", CTX))
    await asyncio.sleep(0.05)
    answer.cancel()  # the user spoke again: the turn is dropped
    await asyncio.gather(answer, return_exceptions=True)
    gate.set()
    await asyncio.wait_for(brain.drain(), 10)
    assert await names(memory) == ["The user's name is Anna."]
