"""The network goes away mid-conversation (a TCP proxy between the provider and the scripted server
is cut like a pulled cable): the next turn is answered locally within a second, a reply cut after
its first sentence ends with a short local closing sentence, and every failure is logged."""

from __future__ import annotations

import asyncio
import logging

import pytest

from gateway.brain.cloud import CloudBrain
from gateway.brain.llm import LlmProvider
from gateway.brain.scripted import Script, ScriptedLlm
from gateway.config import LlmProviderConfig
from tests.brain.netcut import CuttableProxy
from tests.brain.test_cloud_brain import CTX, FALLBACK, ask, collect, local

CLOSING = "Sorry, I lost the connection."


def provider(url: str, cooldown_s: float = 30.0) -> LlmProvider:
    """Short first-token and stall timeouts, the longest total one (600 s): a turn that ends at all
    within the tests' guard (GUARD_S) ended by the short ones, which its log line names."""
    return LlmProvider(LlmProviderConfig(name="cloud", base_url=url, model="m", first_token_timeout_s=0.5,
                                         stall_timeout_s=0.5, total_timeout_s=600, cooldown_s=cooldown_s))


GUARD_S = 120  # a hang guard, not a speed test: 240x the short timeouts, a fifth of the total one


def port_of(llm: ScriptedLlm) -> int:
    return int(llm.url.rsplit(":", 1)[1].split("/")[0])


async def test_after_the_network_is_pulled_the_next_turn_is_answered_locally_after_the_first_token_timeout(
        caplog: pytest.LogCaptureFixture) -> None:
    async with ScriptedLlm([Script(["The LLM answers."])]) as llm, CuttableProxy(port_of(llm)) as proxy:
        brain = CloudBrain(local(), [provider(proxy.url)])
        assert await collect(ask(brain, "explain quantum physics")) == ["The LLM answers."]
        proxy.blackhole()
        with caplog.at_level(logging.WARNING, logger="gateway.brain"):
            async with asyncio.timeout(GUARD_S):
                said = await collect(ask(brain, "and what about gravity"))
        assert " ".join(said) == FALLBACK
        assert "provider cloud failed for box-1: timeout (no first token)" in caplog.text
        assert "every provider failed for box-1 (cloud: timeout (no first token)); answering locally" in caplog.text
        assert len(llm.requests) == 1  # the second request never reached the server
        await brain.close()


async def test_a_reply_cut_by_a_pulled_network_ends_with_a_local_closing_sentence_after_the_stall_timeout(
        caplog: pytest.LogCaptureFixture) -> None:
    async with ScriptedLlm([Script(["The first part. ", "never arrives."], mode="stall_after_first")]) as llm, \
            CuttableProxy(port_of(llm)) as proxy:
        brain = CloudBrain(local(), [provider(proxy.url)], interrupted_reply=CLOSING)
        replies = ask(brain, "tell me a long story")
        assert (await anext(replies)).speech == "The first part."
        proxy.blackhole()
        with caplog.at_level(logging.WARNING, logger="gateway.brain"):
            async with asyncio.timeout(GUARD_S):
                assert await collect(replies) == [CLOSING]
        assert "provider cloud failed for box-1: stalled (nothing for 0.5 s)" in caplog.text
        assert "the reply to box-1 was cut (cloud: stalled (nothing for 0.5 s)); it ends locally" in caplog.text
        await brain.close()


async def test_a_connection_reset_mid_reply_ends_it_with_the_closing_sentence_at_once(
        caplog: pytest.LogCaptureFixture) -> None:
    async with ScriptedLlm([Script(["The first part. ", "never arrives."], mode="stall_after_first")]) as llm, \
            CuttableProxy(port_of(llm)) as proxy:
        brain = CloudBrain(local(), [provider(proxy.url)], interrupted_reply=CLOSING)
        replies = ask(brain, "tell me a long story")
        assert (await anext(replies)).speech == "The first part."
        proxy.reset()
        with caplog.at_level(logging.WARNING, logger="gateway.brain"):
            async with asyncio.timeout(GUARD_S):
                assert await collect(replies) == [CLOSING]
        # The reason shows no timeout was waited for (a stall would say "stalled (nothing for 0.5 s)").
        assert "provider cloud failed for box-1: connection lost" in caplog.text
        await brain.close()


async def test_a_server_that_drops_the_connection_mid_reply_is_not_taken_for_a_finished_reply() -> None:
    async with ScriptedLlm([Script(["The first part. ", "never sent."], mode="cut_after_first")]) as llm:
        brain = CloudBrain(local(), [provider(llm.url)], interrupted_reply=CLOSING)
        assert await collect(ask(brain, "tell me a long story")) == ["The first part.", CLOSING]
        await brain.close()


async def test_with_the_cool_down_off_the_llm_answers_again_on_the_first_turn_after_the_network_is_back() -> None:
    async with ScriptedLlm([Script(["Back online."])]) as llm, CuttableProxy(port_of(llm)) as proxy:
        brain = CloudBrain(local(), [provider(proxy.url, cooldown_s=0)])
        proxy.blackhole()
        assert " ".join(await collect(ask(brain, "explain quantum physics"))) == FALLBACK
        proxy.heal()
        assert await collect(ask(brain, "explain quantum physics")) == ["Back online."]
        await brain.close()
