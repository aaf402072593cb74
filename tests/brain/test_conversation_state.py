"""Conversation state of the LLM brain: routing (local_first / llm_first / local_only), history per
user (devices of one person share it), and tool exchanges kept in the history as part of their turn."""

from __future__ import annotations

import json
import logging

import pytest

from gateway.brain.cloud import CloudBrain
from gateway.brain.factory import build_brain
from gateway.brain.history import Turn
from gateway.brain.scripted import Script, ScriptedLlm
from gateway.config import ConfigError, PrestartToolConfig, parse_config
from gateway.brain.contract import BrainContext
from gateway.brain.local import LocalBrain
from tests.brain.test_cloud_brain import CTX, ROOT, ask, collect, local, provider
from tests.brain.test_tool_loop import TOOLS


def ctx(device_id: str) -> BrainContext:
    return BrainContext(device_id, CTX.now)


def roles(request: dict) -> list[str]:
    return [m["role"] for m in request["messages"]]


# ---- routing ----------------------------------------------------------------------------------
async def test_llm_first_sends_even_what_the_reply_table_knows_to_the_llm() -> None:
    async with ScriptedLlm([Script(["It is half past nine."])]) as llm:
        brain = CloudBrain(local(), [provider("a", llm.url)], route="llm_first")
        assert await collect(ask(brain, "what time is it")) == ["It is half past nine."]
        assert llm.requests[0]["messages"][-1] == {"role": "user", "content": "what time is it"}
        await brain.close()


async def test_llm_first_answers_from_the_reply_table_when_every_provider_fails(caplog) -> None:
    async with ScriptedLlm([Script(mode="fail")]) as bad:
        brain = CloudBrain(local(), [provider("a", bad.url)], route="llm_first")
        with caplog.at_level(logging.WARNING, logger="gateway.brain"):
            said = await collect(ask(brain, "what time is it"))
        assert "9:30" in " ".join(said)
        assert "every provider failed for box-1 (a: HTTP 500); answering locally" in caplog.text
        await brain.close()


async def test_local_only_never_calls_a_configured_provider() -> None:
    async with ScriptedLlm([Script(["never."])]) as llm:
        cfg = parse_config({"brain": {"route": "local_only", "providers": [
            {"name": "p", "base_url": llm.url, "model": "m"}]}}, ROOT)
        brain = build_brain(cfg, None)
        assert isinstance(brain, LocalBrain)
        assert " ".join(await collect(ask(brain, "explain quantum physics"))) == cfg.brain.fallback
        assert llm.requests == []


def test_an_unknown_route_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="route"):
        parse_config({"brain": {"route": "cloud_only"}}, ROOT)


def test_the_configured_route_and_closing_sentence_reach_the_brain() -> None:
    cfg = parse_config({"brain": {"route": "llm_first", "interrupted_reply": "Oops, the line dropped.",
                                  "providers": [{"name": "p", "base_url": "http://127.0.0.1:9/v1", "model": "m"}]}},
                       ROOT)
    brain = build_brain(cfg, None)
    assert isinstance(brain, CloudBrain)
    assert (brain.route, brain.interrupted_reply) == ("llm_first", "Oops, the line dropped.")


# ---- history per user -------------------------------------------------------------------------
async def test_two_devices_of_the_same_user_share_the_conversation_and_others_keep_their_own() -> None:
    async with ScriptedLlm([Script(["Lisa visits on Sunday."]), Script(["Bring flowers."]), Script(["Hello."])]) as llm:
        brain = CloudBrain(local(), [provider("a", llm.url)], users={"kitchen": "anna", "bedroom": "anna"})
        await collect(ask(brain, "when does my daughter visit", ctx("kitchen")))
        await collect(ask(brain, "what should I bring her", ctx("bedroom")))
        await collect(ask(brain, "what should I bring her", ctx("garage")))
        assert llm.requests[1]["messages"] == [
            {"role": "user", "content": "when does my daughter visit"},
            {"role": "assistant", "content": "Lisa visits on Sunday."},
            {"role": "user", "content": "what should I bring her"}]
        assert llm.requests[2]["messages"] == [{"role": "user", "content": "what should I bring her"}]
        await brain.close()


async def test_a_barge_in_on_one_device_corrects_its_own_turn_in_the_shared_history() -> None:
    async with ScriptedLlm([Script(["Once upon a time. ", "There was a king."]), Script(["It is sunny."]),
                            Script(["Ok."])]) as llm:
        brain = CloudBrain(local(), [provider("a", llm.url)], users={"kitchen": "anna", "bedroom": "anna"})
        kitchen = brain.session("kitchen")
        await collect(kitchen.reply("tell me a story", ctx("kitchen")))
        await collect(ask(brain, "how is the weather", ctx("bedroom")))
        kitchen.spoken("Once upon a time.")  # the kitchen's reply was cut after its first sentence
        await collect(kitchen.reply("and after that", ctx("kitchen")))
        assert [m["content"] for m in llm.requests[2]["messages"]] == [
            "tell me a story", "Once upon a time.", "how is the weather", "It is sunny.", "and after that"]
        await brain.close()


def test_the_configured_device_to_user_map_keys_the_history(tmp_path) -> None:
    cfg = parse_config({"memory": {"users": {"kitchen": "anna", "bedroom": "anna"}},
                        "brain": {"providers": [{"name": "p", "base_url": "http://127.0.0.1:9/v1", "model": "m"}]}},
                       ROOT)
    brain = build_brain(cfg, None)
    assert isinstance(brain, CloudBrain)
    assert brain.history("kitchen") is brain.history("bedroom")
    assert brain.history("garage") is not brain.history("kitchen")


# ---- tool exchanges in the history ------------------------------------------------------------
PARIS = Script(tool_calls=[("weather", json.dumps({"city": "Paris"}))])


async def test_a_follow_up_question_sees_the_earlier_tool_exchange() -> None:
    async with ScriptedLlm([PARIS, Script(["It is sunny in Paris."]), Script(["Yes, take sunglasses."])]) as llm:
        brain = CloudBrain(local(), [provider("a", llm.url)], tools=TOOLS)
        await collect(ask(brain, "how is the weather in paris"))
        await collect(ask(brain, "do I need sunglasses there"))
        follow_up = llm.requests[2]["messages"]
        assert roles(llm.requests[2]) == ["user", "assistant", "tool", "assistant", "user"]
        assert follow_up[1]["tool_calls"][0]["function"] == {"name": "weather", "arguments": '{"city": "Paris"}'}
        assert follow_up[2] == {"role": "tool", "tool_call_id": follow_up[1]["tool_calls"][0]["id"],
                                "content": "Paris: 21 degrees, sunny (asked by box-1)"}
        assert follow_up[3] == {"role": "assistant", "content": "It is sunny in Paris."}
        await brain.close()


async def test_trimming_the_history_drops_a_turn_with_its_tool_exchange_as_a_whole() -> None:
    answer = Script(["It is sunny there."])
    async with ScriptedLlm([PARIS, answer, PARIS, answer, PARIS, answer]) as llm:
        asked = {"role": "assistant", "content": None, "tool_calls": [{"id": "call_0", "type": "function", "function": {
            "name": "weather", "arguments": '{"city": "Paris"}'}}]}
        one_turn = Turn("weather in paris number 1", "It is sunny there.", [asked, {
            "role": "tool", "tool_call_id": "call_0", "content": "Paris: 21 degrees, sunny (asked by box-1)"}])
        brain = CloudBrain(local(), [provider("a", llm.url)], tools=TOOLS, history_tokens=one_turn.tokens() * 3 // 2)
        for i in (1, 2, 3):
            await collect(ask(brain, f"weather in paris number {i}"))
        last = llm.requests[-1]
        assert roles(last) == ["user", "assistant", "tool", "assistant", "user", "assistant", "tool"]
        assert [m["content"] for m in last["messages"] if m["role"] == "user"] == [
            "weather in paris number 2", "weather in paris number 3"]
        await brain.close()


async def test_a_failed_providers_tool_exchange_is_not_kept_in_the_history() -> None:
    async with ScriptedLlm([PARIS, Script(mode="fail")]) as bad, \
            ScriptedLlm([Script(["Sunny."]), Script(["You are welcome."])]) as good:
        brain = CloudBrain(local(), [provider("bad", bad.url), provider("good", good.url)], tools=TOOLS)
        assert await collect(ask(brain, "weather in paris")) == ["Sunny."]
        await collect(ask(brain, "and in rome"))
        assert roles(good.requests[1]) == ["user", "assistant", "user"]
        await brain.close()


async def test_prestart_results_stay_in_the_history_only_when_asked_to() -> None:
    async with ScriptedLlm([Script(["Sunny."])]) as llm:
        brain = CloudBrain(local(), [provider("a", llm.url)], tools=TOOLS, prestart=[
            PrestartToolConfig(tool="weather", arguments={"city": "{{question}}"}, keep_in_history=True),
            PrestartToolConfig(tool="weather", arguments={"city": "Oslo"})])
        await collect(ask(brain, "Lisbon"))
        await collect(ask(brain, "Rome"))
        second = llm.requests[1]["messages"]
        assert [m["role"] for m in second] == ["system", "user", "assistant", "tool", "assistant", "user"]
        assert second[2]["tool_calls"][0]["function"] == {"name": "weather", "arguments": '{"city": "Lisbon"}'}
        assert second[3]["content"] == "Lisbon: 21 degrees, sunny (asked by box-1)"
        assert "Oslo" not in json.dumps(second[1:])  # not kept: only this turn's context
        assert "Rome: 21 degrees" in second[0]["content"] and "Oslo: 21 degrees" in second[0]["content"]
        await brain.close()
