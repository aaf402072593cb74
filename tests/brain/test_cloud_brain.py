"""CloudBrain against a scripted OpenAI-compatible server on 127.0.0.1: streaming, local first,
provider fallback on error / stall / garbage, history with a budget, barge-in keeps history honest."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from datetime import datetime, timezone
from pathlib import Path

import pytest

from gateway.brain.cloud import CloudBrain
from gateway.brain.factory import build_brain
from gateway.brain.llm import LlmProvider
from gateway.config import BrainConfig, GatewayConfig, LlmProviderConfig, parse_config
from gateway.brain.contract import Brain, BrainContext, Sentence
from gateway.brain.local import LocalBrain
from gateway.brain.replies import load_reply_table
from gateway.brain.scripted import Script, ScriptedLlm

ROOT = Path(__file__).resolve().parents[2]
CTX = BrainContext("box-1", datetime(2026, 3, 1, 9, 30, tzinfo=timezone.utc))
FALLBACK = BrainConfig().fallback


def local() -> LocalBrain:
    return LocalBrain(load_reply_table(ROOT / "config" / "replies.yaml"), FALLBACK)


def provider(name: str, url: str, first_token_timeout_s: float = 2.0, stall_timeout_s: float = 2.0,
             total_timeout_s: float = 10) -> LlmProvider:
    return LlmProvider(LlmProviderConfig(name=name, base_url=url, model="scripted", api_key="test-key",
                                         first_token_timeout_s=first_token_timeout_s, total_timeout_s=total_timeout_s,
                                         stall_timeout_s=stall_timeout_s))


GUARD_S = 120  # a hang guard, not a speed test: the stalls below end only by a timeout, the total one is 600 s


def ask(brain: Brain, utterance: str, ctx: BrainContext = CTX) -> AsyncIterator[Sentence]:
    """The reply of a new session of `ctx.device_id` (the history is the brain's, shared)."""
    return brain.session(ctx.device_id).reply(utterance, ctx)


async def collect(sentences: AsyncIterator[Sentence]) -> list[str]:
    """The speech of each sentence of a reply."""
    return [s.speech async for s in sentences]


async def test_an_unknown_question_is_answered_by_the_llm_sentence_by_sentence() -> None:
    async with ScriptedLlm([Script(["[happy] Hello", " there! ", "It is **sunny**", " today.", " 好的。"])]) as llm:
        brain = CloudBrain(local(), [provider("a", llm.url)], system_prompt="Be brief.")
        assert await collect(ask(brain, "tell me about the weather on mars")) == [
            "Hello there!", "It is sunny today.", "好的。"]
        sent = llm.requests[0]
        assert sent["model"] == "scripted" and sent["stream"] is True
        assert sent["messages"] == [{"role": "system", "content": "Be brief."},
                                    {"role": "user", "content": "tell me about the weather on mars"}]
        await brain.close()


async def test_the_first_sentence_is_spoken_before_the_llm_has_finished() -> None:
    async with ScriptedLlm([Script(["Hello there. ", "This part comes a whole second later."], delay_s=1.0)]) as llm:
        brain = CloudBrain(local(), [provider("a", llm.url)])
        replies = ask(brain, "tell me a story")
        assert (await anext(replies)).speech == "Hello there."
        assert not llm.served.is_set()  # the LLM is still streaming its reply (order, not speed)
        assert await collect(replies) == ["This part comes a whole second later."]
        await brain.close()


async def test_the_reply_table_answers_locally_without_asking_the_llm() -> None:
    async with ScriptedLlm([Script(["never said."])]) as llm:
        brain = CloudBrain(local(), [provider("a", llm.url)])
        said = await collect(ask(brain, "what time is it"))
        assert said and "9:30" in " ".join(said)
        assert llm.requests == []
        await brain.close()


async def test_a_failing_provider_is_logged_and_the_next_one_answers(caplog: pytest.LogCaptureFixture) -> None:
    async with ScriptedLlm([Script(mode="fail")]) as bad, ScriptedLlm([Script(["Backup here."])]) as good:
        brain = CloudBrain(local(), [provider("first", bad.url), provider("second", good.url)])
        with caplog.at_level(logging.WARNING, logger="gateway.brain.cloud"):
            assert await collect(ask(brain, "explain quantum physics")) == ["Backup here."]
        assert "provider first failed for box-1: HTTP 500" in caplog.text
        await brain.close()


async def test_a_stalled_provider_is_abandoned_after_the_first_token_timeout() -> None:
    async with ScriptedLlm([Script(mode="stall")]) as stalled, ScriptedLlm([Script(["Backup here."])]) as good:
        brain = CloudBrain(local(), [provider("slow", stalled.url, 0.3, total_timeout_s=600), provider("fast", good.url)])
        # The stall never ends by itself and the total timeout is 600 s: an answer within the guard
        # came by the first-token timeout.
        async with asyncio.timeout(GUARD_S):
            assert await collect(ask(brain, "explain quantum physics")) == ["Backup here."]
        await brain.close()


async def test_garbage_from_a_provider_falls_back_to_the_next(caplog: pytest.LogCaptureFixture) -> None:
    async with ScriptedLlm([Script(mode="garbage")]) as bad, ScriptedLlm([Script(["Backup here."])]) as good:
        brain = CloudBrain(local(), [provider("junk", bad.url), provider("second", good.url)])
        with caplog.at_level(logging.WARNING, logger="gateway.brain.cloud"):
            assert await collect(ask(brain, "explain quantum physics")) == ["Backup here."]
        assert "provider junk failed" in caplog.text
        await brain.close()


async def test_when_every_provider_fails_the_local_brain_answers_without_waiting_for_the_total_timeout(
        caplog: pytest.LogCaptureFixture) -> None:
    async with ScriptedLlm([Script(mode="fail")]) as bad, ScriptedLlm([Script(mode="stall")]) as stalled:
        brain = CloudBrain(local(), [provider("a", bad.url), provider("b", stalled.url, 0.5, total_timeout_s=600)])
        with caplog.at_level(logging.WARNING, logger="gateway.brain.cloud"):
            async with asyncio.timeout(GUARD_S):  # (the total timeout is 600 s)
                said = await collect(ask(brain, "explain quantum physics"))
        assert " ".join(said) == FALLBACK
        assert "provider a failed for box-1: HTTP 500" in caplog.text
        assert "provider b failed for box-1: timeout (no first token)" in caplog.text
        assert "every provider failed for box-1" in caplog.text
        await brain.close()


async def test_an_unreachable_provider_falls_back_to_local() -> None:
    async with ScriptedLlm([Script(["x."])]) as llm:
        url = llm.url
    brain = CloudBrain(local(), [provider("gone", url, 0.5)])
    assert " ".join(await collect(ask(brain, "explain quantum physics"))) == FALLBACK
    await brain.close()


async def test_a_reply_cut_mid_stream_is_not_repeated_by_another_provider() -> None:
    async with ScriptedLlm([Script(["First part. ", "never"], mode="stall_after_first")]) as cut, \
            ScriptedLlm([Script(["Other answer."])]) as other:
        brain = CloudBrain(local(), [LlmProvider(LlmProviderConfig(
            name="cut", base_url=cut.url, model="m", first_token_timeout_s=1, total_timeout_s=0.5)),
            provider("other", other.url)])
        assert await collect(ask(brain, "explain quantum physics")) == ["First part.",
                                                                          BrainConfig().interrupted_reply]
        assert other.requests == []
        await brain.close()


async def test_the_next_turn_carries_the_history_of_this_device_only() -> None:
    async with ScriptedLlm([Script(["One."]), Script(["Two."]), Script(["Three."])]) as llm:
        brain = CloudBrain(local(), [provider("a", llm.url)], system_prompt="P")
        await collect(ask(brain, "first question"))
        await collect(ask(brain, "second question"))
        await collect(ask(brain, "other box question", BrainContext("box-2", CTX.now)))
        assert llm.requests[1]["messages"] == [
            {"role": "system", "content": "P"}, {"role": "user", "content": "first question"},
            {"role": "assistant", "content": "One."}, {"role": "user", "content": "second question"}]
        assert llm.requests[2]["messages"][1:] == [{"role": "user", "content": "other box question"}]
        await brain.close()


async def test_history_over_its_token_budget_drops_the_oldest_turns_first() -> None:
    async with ScriptedLlm([Script(["Answer number something long enough."])]) as llm:
        brain = CloudBrain(local(), [provider("a", llm.url)], history_tokens=40)
        for i in range(6):
            await collect(ask(brain, f"question number {i} about the universe"))
        users = [m["content"] for m in llm.requests[-1]["messages"] if m["role"] == "user"]
        assert users[-1] == "question number 5 about the universe"
        assert "question number 0 about the universe" not in users
        assert 1 < len(users) < 6
        await brain.close()


async def test_after_a_barge_in_history_keeps_only_what_was_played() -> None:
    async with ScriptedLlm([Script(["Once upon a time. ", "There was a king. ", "The end."]), Script(["Ok."])]) as llm:
        brain = CloudBrain(local(), [provider("a", llm.url)])
        session = brain.session(CTX.device_id)
        replies = session.reply("tell me a story", CTX)
        assert (await anext(replies)).speech == "Once upon a time."
        assert (await anext(replies)).speech == "There was a king."  # synthesized, but the user barged in
        await replies.aclose()
        session.spoken("Once upon a time.")  # what Playback.said() says was played
        await collect(session.reply("stop, tell me another", CTX))
        assert llm.requests[1]["messages"][:2] == [
            {"role": "user", "content": "tell me a story"}, {"role": "assistant", "content": "Once upon a time."}]
        await brain.close()


def test_without_providers_the_configured_brain_is_the_local_one_as_before() -> None:
    assert isinstance(build_brain(GatewayConfig(base_dir=ROOT), None), LocalBrain)


def test_with_providers_the_configured_brain_is_the_cloud_brain_with_the_key_from_the_environment(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEST_LLM_KEY", "sk-test")
    cfg = parse_config({"brain": {"providers": [{"name": "p", "base_url": "http://127.0.0.1:9/v1", "model": "m",
                                                  "api_key": "${TEST_LLM_KEY}"}], "split": "clause",
                                  "prestart": [{"tool": "memory_search", "arguments": {"query": "{{question}}"}}]}}, ROOT)
    brain = build_brain(cfg, None)
    assert isinstance(brain, CloudBrain) and brain.clauses
    assert [(p.tool, p.arguments) for p in brain.prestart] == [("memory_search", {"query": "{{question}}"})]
    assert brain.providers[0].cfg.api_key == "sk-test"
