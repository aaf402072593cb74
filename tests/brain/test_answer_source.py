"""Each reply sentence names the brain that made it (Sentence.source): the reply table "local", an
LLM provider "llm", the local fallback after every provider failed "local"."""

from __future__ import annotations

from gateway.brain.cloud import CloudBrain
from gateway.brain.scripted import Script, ScriptedLlm
from tests.brain.test_cloud_brain import CTX, ask, local, provider


async def test_the_reply_table_the_llm_and_the_fallback_name_their_source() -> None:
    assert {s.source async for s in ask(local(), "what time is it")} == {"local"}
    async with ScriptedLlm([Script(["Mars is cold. ", "Very cold."])]) as llm:
        brain = CloudBrain(local(), [provider("a", llm.url)])
        assert [s.source async for s in ask(brain, "tell me about mars")] == ["llm", "llm"]
        assert {s.source async for s in ask(brain, "what time is it")} == {"local"}  # the table first
        await brain.close()
        url = llm.url
    brain = CloudBrain(local(), [provider("gone", url, 0.5)])  # the server is gone: the fallback
    assert {s.source async for s in ask(brain, "explain quantum physics", CTX)} == {"local"}
    await brain.close()
