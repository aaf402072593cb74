"""A provider that failed with a network-type failure (no first token, connection failed or lost,
a stall) is skipped for its cool-down: the following questions are answered at once, by the next
provider or the local brain, and after the cool-down the provider is asked again. HTTP errors and
garbage fail fast and do not put a provider on cool-down."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest

from gateway.brain.cloud import CloudBrain
from gateway.brain.cooldown import Cooldown
from gateway.brain.llm import LlmProvider
from gateway.brain.scripted import Script, ScriptedLlm
from gateway.config import LlmProviderConfig
from tests.brain.netcut import CuttableProxy
from tests.brain.test_cloud_brain import CTX, FALLBACK, ask, collect, local
from tests.brain.test_network_loss import port_of

TIMEOUT_S = 0.5


def provider(name: str, url: str, cooldown_s: float) -> LlmProvider:
    return LlmProvider(LlmProviderConfig(name=name, base_url=url, model="m", first_token_timeout_s=TIMEOUT_S,
                                         stall_timeout_s=TIMEOUT_S, total_timeout_s=10, cooldown_s=cooldown_s))


async def timed(brain: CloudBrain, question: str) -> tuple[str, float]:
    started = time.monotonic()
    said = " ".join(await collect(ask(brain, question)))
    return said, time.monotonic() - started


async def test_after_a_pulled_network_only_one_turn_waits_and_the_llm_is_back_after_the_cool_down(
        caplog: pytest.LogCaptureFixture) -> None:
    async with ScriptedLlm([Script(["The LLM answers."]), Script(["Back online."])]) as llm, \
            CuttableProxy(port_of(llm)) as proxy:
        cloud = provider("cloud", proxy.url, cooldown_s=0.5)
        brain = CloudBrain(local(), [cloud])
        assert await collect(ask(brain, "explain quantum physics")) == ["The LLM answers."]
        proxy.blackhole()
        with caplog.at_level(logging.INFO, logger="gateway.brain"):
            said, waited = await timed(brain, "and what about gravity")  # turn 2 pays the timeout
            assert said == FALLBACK and waited >= TIMEOUT_S
            connections = proxy.connections
            said, waited = await timed(brain, "and what about light")  # turn 3: the provider cools down
            assert said == FALLBACK
            assert proxy.connections == connections  # the provider was not even asked (so no timeout waited)
            assert waited < 5, f"turn 3 took {1000 * waited:.0f} ms"  # generous, not a speed test
            assert "provider cloud cooling down for 0.5 s (timeout (no first token))" in caplog.text
            assert "every provider failed for box-1 (cloud: cooling down (" in caplog.text
            proxy.heal()
            await asyncio.wait_for(cloud.cooldown.over(), 2)
            said, _ = await timed(brain, "explain quantum physics")
        assert said == "Back online."
        assert "provider cloud answers again (down for " in caplog.text
        assert caplog.text.count("cooling down for") == 1  # logged once per outage
        assert len(llm.requests) == 2  # turns 2 and 3 never reached the server
        await brain.close()


async def test_a_cooling_provider_is_skipped_and_the_next_provider_answers_at_once() -> None:
    async with ScriptedLlm([Script(["Never heard."])]) as first, ScriptedLlm([Script(["The backup answers."])]) as second, \
            CuttableProxy(port_of(first)) as proxy:
        proxy.blackhole()
        brain = CloudBrain(local(), [provider("main", proxy.url, cooldown_s=30), provider("backup", second.url, 30)])
        said, waited = await timed(brain, "explain quantum physics")
        assert said == "The backup answers." and waited >= TIMEOUT_S
        connections = proxy.connections
        said, waited = await timed(brain, "and what about gravity")
        assert said == "The backup answers."
        assert proxy.connections == connections  # the cooling provider was skipped, not asked and waited for
        assert waited < 5, f"the second turn took {1000 * waited:.0f} ms"  # generous, not a speed test
        assert len(second.requests) == 2 and first.requests == []
        await brain.close()


async def test_an_http_error_does_not_put_the_provider_on_cool_down() -> None:
    async with ScriptedLlm([Script(mode="fail"), Script(["Fine again."])]) as llm:
        cloud = provider("cloud", llm.url, cooldown_s=30)
        brain = CloudBrain(local(), [cloud])
        assert " ".join(await collect(ask(brain, "explain quantum physics"))) == FALLBACK
        assert cloud.cooldown.remaining() == 0
        assert await collect(ask(brain, "explain quantum physics")) == ["Fine again."]
        await brain.close()


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_provider_still_down_after_its_cool_down_cools_down_again_and_is_logged_once_as_down(
        caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    cooldown = Cooldown("cloud", 30, clock)
    with caplog.at_level(logging.INFO, logger="gateway.brain"):
        cooldown.failed("timeout (no first token)")
        clock.now += 10
        cooldown.failed("timeout (no first token)")  # a second device found out too: no new cool-down
        assert cooldown.remaining() == 20
        clock.now += 20
        assert cooldown.remaining() == 0  # tried again...
        cooldown.failed("connection failed: APIConnectionError")  # ...still down
        assert cooldown.remaining() == 30
        clock.now += 35
        cooldown.answered()
    assert caplog.text.count("cooling down for 30 s") == 1
    assert "provider cloud still down after 30 s (connection failed: APIConnectionError)" in caplog.text
    assert "provider cloud answers again (down for 65.0 s)" in caplog.text


def test_a_cool_down_of_zero_never_skips_the_provider() -> None:
    cooldown = Cooldown("cloud", 0)
    cooldown.failed("timeout (no first token)")
    assert cooldown.remaining() == 0
