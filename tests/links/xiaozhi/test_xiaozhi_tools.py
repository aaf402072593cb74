"""A xiaozhi box's own MCP tools (the emulator's, in box.py): listed after its hello (paged by
cursor), called by an Action code without the LLM (before the sentence's audio), by the scripted
LLM as `device__<tool>`, and through the gateway's MCP server (list_device_tools /
call_device_tool); a tool error or timeout goes to the model, not the user."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import numpy as np
import pytest_asyncio
from mcp.shared.memory import create_connected_server_and_client_session

from gateway.app import Gateway
from gateway.audio.pcm import resample
from gateway.brain.scripted import Script, ScriptedLlm
from gateway.config import GatewayConfig
from gateway.devices.device_actions import DeviceActions
from gateway.engines.runner import EngineRunner
from gateway.links.websocket import WebSocketLink
from gateway.links.xiaozhi.emotions import EmotionTable
from gateway.links.xiaozhi.endpoint import XiaozhiEndpoint
from gateway.mcp_server.devices import GatewayDevices
from gateway.mcp_server.tools import McpDeps, build_server
from tests.links.xiaozhi.box import XiaozhiBox
from tests.links.xiaozhi.conftest import ROOT, xiaozhi_cfg

OTA = "/xiaozhi/ota/"


async def serve(cfg: GatewayConfig, runner: EngineRunner) -> AsyncIterator[tuple[str, Gateway]]:
    s = cfg.server
    endpoint = XiaozhiEndpoint.from_config(cfg.xiaozhi, EmotionTable.load(cfg.path(cfg.xiaozhi.emotions)),
                                           s.max_frame_bytes, DeviceActions.load(cfg.path(cfg.xiaozhi.device_actions)))
    link = WebSocketLink("127.0.0.1", 0, s.websocket_path, s.max_frame_bytes, [endpoint])
    gateway, ready = Gateway(cfg, runner, [link]), asyncio.Event()
    task = asyncio.create_task(gateway.serve(ready))
    await asyncio.wait_for(ready.wait(), 10)
    yield f"http://127.0.0.1:{link.port}", gateway
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def local_gw(tmp_path_factory, fake_runner) -> AsyncIterator[tuple[str, Gateway]]:
    """No LLM: the reply table answers, Action codes drive the box's tools (config/device_actions.yaml)."""
    async for served in serve(xiaozhi_cfg(tmp_path_factory.mktemp("xz-tools")), fake_runner):
        yield served


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def llm_gw(tmp_path_factory, fake_runner) -> AsyncIterator[tuple[str, Gateway, ScriptedLlm]]:
    """The scripted LLM answers everything (llm_first); a box's tool answers within 0.5 s or times out."""
    async with ScriptedLlm([Script(["Okay."])]) as llm:
        cfg = xiaozhi_cfg(tmp_path_factory.mktemp("xz-tools-llm"), xiaozhi={"tool_timeout_s": 0.5}, brain={
            "providers": [{"name": "scripted", "base_url": llm.url, "model": "m", "api_key": "k"}],
            "route": "llm_first"})
        async for url, gateway in serve(cfg, fake_runner):
            yield url, gateway, llm


def mic(speak, text: str) -> np.ndarray:
    audio, rate = speak(text)
    return resample(audio, rate, 16000)


async def box_with_tools(base: str, gateway: Gateway, mac: str, **kw: Any) -> XiaozhiBox:
    box = XiaozhiBox(mac=mac, **kw)
    assert (await box.ota(base + OTA))[0] == 200
    await box.open()
    device = "xiaozhi-" + mac.replace(":", "")
    await gateway.device_tools.wait_until(lambda t: len(t.listed(device)) == len(box.tools), 10)
    return box


async def ask(box: XiaozhiBox, speak, text: str) -> None:
    await box.listen("manual")
    await box.say(mic(speak, text))
    await box.stop_listening()
    await box.wait_for(lambda m: m.get("type") == "tts" and m.get("state") == "stop", 30)


async def test_the_boxs_tools_are_listed_page_by_page_after_its_hello(local_gw):
    base, gateway = local_gw
    box = await box_with_tools(base, gateway, "a0:b1:c2:70:00:01", tools_per_page=1)
    assert box.mcp_methods[:2] == ["initialize", "notifications/initialized"]
    assert box.mcp_methods.count("tools/list") == 4  # one tool per page, 4 tools: the cursor was followed
    assert [t.name for t in gateway.device_tools.listed("xiaozhi-a0b1c2700001")] == [t["name"] for t in box.tools]
    await box.close()


async def test_a_box_without_features_mcp_is_not_asked_for_tools(local_gw):
    base, gateway = local_gw
    box = XiaozhiBox(mac="a0:b1:c2:70:00:02")
    await box.ota(base + OTA)
    await box.open({"type": "hello", "version": 1, "features": {}, "transport": "websocket",
                    "audio_params": {"format": "opus", "sample_rate": 16000, "channels": 1, "frame_duration": 60}})
    await box.close()
    assert box.mcp_methods == [] and gateway.device_tools.listed("xiaozhi-a0b1c2700002") == []


async def test_an_action_code_calls_the_boxs_tool_before_the_sentences_audio(local_gw, fake_speak):
    base, gateway = local_gw
    box = await box_with_tools(base, gateway, "a0:b1:c2:70:00:03")
    await ask(box, fake_speak, "Hello!")  # the reply greets: greeting.hello -> self.otto.action hand_wave
    await box.wait_until(lambda: box.tool_calls, 10)
    assert box.tool_calls[0] == ("self.otto.action", {"action": "hand_wave", "direction": 1})
    assert box.events.index("tool:self.otto.action") < box.events.index("audio")
    await box.close()


async def test_the_llm_calls_the_boxs_tool_and_speaks_its_answer(llm_gw, fake_speak):
    base, gateway, llm = llm_gw
    box = await box_with_tools(base, gateway, "a0:b1:c2:70:00:04")
    llm.requests.clear()
    llm.scripts = [Script(tool_calls=[("device__self_audio_speaker_set_volume", json.dumps({"volume": 30}))]),
                   Script(["I turned the volume down."])]
    await ask(box, fake_speak, "Quieter please.")
    assert box.tool_calls == [("self.audio_speaker.set_volume", {"volume": 30})] and box.volume == 30
    offered = {t["function"]["name"] for t in llm.requests[0]["tools"]}
    assert {"device__self_audio_speaker_set_volume", "device__self_otto_action", "list_devices"} <= offered
    assert [m["content"] for m in llm.requests[1]["messages"] if m["role"] == "tool"] == ["true"]
    assert " ".join(m["text"] for m in box.of_type("tts", state="sentence_start")) == "I turned the volume down."
    await box.close()


async def test_a_tool_error_or_timeout_goes_to_the_model_not_the_user(llm_gw, fake_speak):
    base, gateway, llm = llm_gw
    box = await box_with_tools(base, gateway, "a0:b1:c2:70:00:05",
                               tool_faults={"self.audio_speaker.set_volume": "error", "self.otto.action": "hang",
                                            "self.screen.set_brightness": "is_error"})
    llm.requests.clear()
    llm.scripts = [Script(tool_calls=[("device__self_audio_speaker_set_volume", '{"volume": 5}'),
                                      ("device__self_otto_action", '{"action": "walk"}'),
                                      ("device__self_screen_set_brightness", '{"brightness": 5}'),
                                      ("device__self_fly", "{}")]),
                   Script(["Sorry, that did not work."])]
    await ask(box, fake_speak, "Do things.")
    results = [m["content"] for m in llm.requests[1]["messages"] if m["role"] == "tool"]
    assert results[0] == "error: device-tool-error: Missing valid argument: volume"
    assert results[1] == "error: device-tool-timeout: the device did not answer tools/call within 0.5 s"
    assert results[2] == "error: device-tool-error: self.screen.set_brightness: motor overheated"
    assert results[3].startswith("error: device 'xiaozhi-a0b1c2700005' has no tool 'device__self_fly'; it offers: ")
    spoken = " ".join(m["text"] for m in box.of_type("tts", state="sentence_start"))
    assert spoken == "Sorry, that did not work." and not box.of_type("alert")
    await box.close()


async def test_agents_list_and_call_a_boxs_tools_through_the_gateways_mcp_server(local_gw):
    base, gateway = local_gw
    box = await box_with_tools(base, gateway, "a0:b1:c2:70:00:06", tool_faults={"self.otto.action": "is_error"})
    devices = GatewayDevices(gateway.registry, gateway.device_tools)
    server = build_server(McpDeps(memory=None, devices=devices))  # type: ignore[arg-type] - device tools need no memory
    async with create_connected_server_and_client_session(server) as session:
        listed = await session.call_tool("list_device_tools", {"device_id": "xiaozhi-a0b1c2700006"})
        assert not listed.isError
        names = [t["name"] for t in json.loads(listed.content[0].text)] if len(listed.content) == 1 else [
            json.loads(c.text)["name"] for c in listed.content]
        assert names == [t["name"] for t in box.tools]
        called = await session.call_tool("call_device_tool", {"device_id": "xiaozhi-a0b1c2700006",
                                                              "name": "self.audio_speaker.set_volume", "arguments": {"volume": 55}})
        assert not called.isError and json.loads(called.content[0].text) == {"result": "true"} and box.volume == 55
        failed = await session.call_tool("call_device_tool", {"device_id": "xiaozhi-a0b1c2700006",
                                                              "name": "self.otto.action", "arguments": {"action": "walk"}})
        assert failed.isError and "motor overheated" in failed.content[0].text
        nowhere = await session.call_tool("list_device_tools", {"device_id": "attic"})
        assert nowhere.isError and "'attic' is not connected" in nowhere.content[0].text
    await box.close()


def test_the_device_actions_table_reports_bad_rows_with_their_line(tmp_path, caplog):
    path = tmp_path / "actions.yaml"
    path.write_text("greeting.hello:\n  tool: self.otto.action\n  arguments: {action: hand_wave}\n"
                    "NotACode:\n  tool: x\n"
                    "farewell.goodbye:\n  tool: ''\n"
                    "social.thanks:\n  tool: t\n  arguments: [1, 2]\n"
                    "social.care:\n  tool: t\n  extra: 1\n")
    table = DeviceActions.load(path)
    assert list(table.calls) == ["greeting.hello"]
    assert table.for_code("greeting.hello").arguments == {"action": "hand_wave"}
    lines = [r.getMessage() for r in caplog.records if "row skipped" in r.getMessage()]
    assert [line.split(":")[1] for line in lines] == ["4", "6", "8", "11"]
    assert DeviceActions.load(tmp_path / "missing.yaml").calls == {}
    shipped = DeviceActions.load(ROOT / "config/device_actions.yaml")
    assert shipped.for_code("greeting.hello").tool == "self.otto.action"
