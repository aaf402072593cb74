"""The LLM calls tools: results go back to the model, errors are shown to the model (not the user),
and the loop is bounded."""

from __future__ import annotations

import json
from typing import Any

from gateway.brain.cloud import CloudBrain
from gateway.brain.fallback import MAX_TOOL_ROUNDS
from gateway.config import PrestartToolConfig
from gateway.brain.tools import Tool, Toolbox
from gateway.brain.scripted import Script, ScriptedLlm
from tests.brain.test_cloud_brain import CTX, FALLBACK, ask, collect, local, provider


async def weather(args: dict[str, Any], device_id: str) -> str:
    if args["city"] == "Atlantis":
        raise LookupError("no such city")
    return f"{args['city']}: 21 degrees, sunny (asked by {device_id})"


TOOLS = Toolbox([Tool("weather", "The weather in a city.", {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}, weather)])


def tool_results(request: dict) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


async def test_a_tool_result_goes_back_to_the_model_which_then_answers() -> None:
    async with ScriptedLlm([Script(tool_calls=[("weather", json.dumps({"city": "Paris"}))]),
                            Script(["It is sunny in Paris."])]) as llm:
        brain = CloudBrain(local(), [provider("a", llm.url)], tools=TOOLS)
        assert await collect(ask(brain, "how is the weather in paris")) == ["It is sunny in Paris."]
        assert llm.requests[0]["tools"][0]["function"]["name"] == "weather"
        asked = llm.requests[1]["messages"][-2]
        assert asked["tool_calls"][0]["function"] == {"name": "weather", "arguments": '{"city": "Paris"}'}
        assert tool_results(llm.requests[1]) == ["Paris: 21 degrees, sunny (asked by box-1)"]
        await brain.close()


async def test_tool_errors_and_unknown_tools_are_shown_to_the_model_not_the_user() -> None:
    async with ScriptedLlm([Script(tool_calls=[("weather", '{"city": "Atlantis"}'), ("teleport", "{}")]),
                            Script(["I could not find that city."])]) as llm:
        brain = CloudBrain(local(), [provider("a", llm.url)], tools=TOOLS)
        assert await collect(ask(brain, "weather in atlantis")) == ["I could not find that city."]
        assert tool_results(llm.requests[1]) == [
            "error: LookupError: no such city", "error: unknown tool 'teleport'; available: weather"]
        await brain.close()


async def test_a_model_that_keeps_calling_tools_is_stopped_and_the_user_still_gets_an_answer() -> None:
    async with ScriptedLlm([Script(tool_calls=[("weather", '{"city": "Paris"}')])]) as llm:
        brain = CloudBrain(local(), [provider("a", llm.url)], tools=TOOLS)
        assert " ".join(await collect(ask(brain, "weather forever"))) == FALLBACK
        assert len(llm.requests) == MAX_TOOL_ROUNDS + 1
        assert "tools" not in llm.requests[-1]  # the last round offers no tools
        await brain.close()


async def test_prestart_tools_run_with_the_question_and_their_result_is_context_for_the_model() -> None:
    async with ScriptedLlm([Script(["Sunny."])]) as llm:
        brain = CloudBrain(local(), [provider("a", llm.url)], system_prompt="P", tools=TOOLS,
                           prestart=[PrestartToolConfig(tool="weather", arguments={"city": "{{question}}"})])
        assert await collect(ask(brain, "Lisbon")) == ["Sunny."]
        system = llm.requests[0]["messages"][0]["content"]
        assert system == "P\n\nContext from weather:\nLisbon: 21 degrees, sunny (asked by box-1)"
        await brain.close()


async def test_a_failing_prestart_tool_gives_the_model_its_error_and_the_turn_goes_on() -> None:
    async with ScriptedLlm([Script(["I do not know that city."])]) as llm:
        brain = CloudBrain(local(), [provider("a", llm.url)], tools=TOOLS, prestart=[PrestartToolConfig(tool="weather", arguments={"city": "{{question}}"})])
        assert await collect(ask(brain, "Atlantis")) == ["I do not know that city."]
        assert "error: LookupError: no such city" in llm.requests[0]["messages"][0]["content"]
        await brain.close()


async def test_the_model_can_list_the_connected_devices() -> None:
    from gateway.brain.gateway_tools import device_tools

    async with ScriptedLlm([Script(tool_calls=[("list_devices", "{}")]), Script(["Two boxes are on."])]) as llm:
        brain = CloudBrain(local(), [provider("a", llm.url)],
                           tools=Toolbox(device_tools(lambda: ["kitchen", "box-1"])))
        assert await collect(ask(brain, "which devices are on")) == ["Two boxes are on."]
        assert tool_results(llm.requests[1]) == ["connected devices: box-1, kitchen (you speak through box-1)"]
        await brain.close()
