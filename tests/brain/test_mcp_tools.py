"""Tools from external MCP servers (brain.mcp_servers) for the LLM, against real MCP servers: a
FastMCP script over stdio and over streamable HTTP on 127.0.0.1, with the scripted LLM."""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from firmware_protocol import Hello, ReplyText, TextInput, Welcome
from gateway.app import Gateway
from gateway.brain.cloud import CloudBrain
from gateway.brain.factory import build_brain, build_mcp_clients
from gateway.brain.scripted import Script, ScriptedLlm
from gateway.brain.tools import Toolbox
from gateway.config import McpServerConfig, parse_config
from gateway.errors import ConfigError
from gateway.links.memory import MemoryLink
from gateway.brain.mcp_client import McpClients
from gateway.mcp_server.http import serve_http
from tests.brain.mcp_weather_server import build
from tests.brain.test_cloud_brain import CTX, ask, collect, local, provider

ROOT = Path(__file__).resolve().parents[2]
WEATHER = [sys.executable, str(Path(__file__).with_name("mcp_weather_server.py"))]
OSLO = "Oslo: 18 degrees C and light rain tomorrow"
TOKEN = "weather-token-0123456789"
FAST = (0.05, 0.1)  # reconnection back-off in the tests


def weather(**kw: object) -> McpServerConfig:
    return McpServerConfig(**{"name": "weather", "command": tuple(WEATHER), "env": {"WEATHER_UNIT": "degrees C"}, **kw})


async def _stop(task: asyncio.Task, what: str) -> None:
    """Cancel `task` and wait for it, bounded: a task that does not end fails the test instead of
    hanging it (a cancellation lost inside the SDK's anyio scopes once kept the MCP client
    reconnecting, tests/brain/test_mcp_cancel.py)."""
    task.cancel()
    done, _pending = await asyncio.wait({task}, timeout=15)
    if not done:
        pytest.fail(f"{what} did not end within 15 s of being cancelled")


@asynccontextmanager
async def running(*servers: McpServerConfig, wait_for: tuple[str, ...] = ("weather",)) -> AsyncIterator[McpClients]:
    clients = McpClients(servers, backoff_s=FAST)
    task = asyncio.create_task(clients.run())
    try:
        for name in wait_for:
            await asyncio.wait_for(clients.servers[name].connected.wait(), 20)
        yield clients
    finally:
        await _stop(task, "McpClients.run")


@asynccontextmanager
async def http_weather(port: int = 0) -> AsyncIterator[str]:
    server, ready = build(), asyncio.Event()
    task = asyncio.create_task(serve_http(server, "127.0.0.1", port, TOKEN, ready))
    await asyncio.wait_for(ready.wait(), 10)
    try:
        yield f"http://127.0.0.1:{server.settings.port}/mcp"
    finally:
        await _stop(task, "serve_http")


def tool_results(request: dict) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


async def test_a_stdio_servers_tools_are_offered_as_server__tool_with_description_and_schema() -> None:
    async with running(weather()) as clients:
        tools = {t.name: t for t in clients.tools()}
        assert set(tools) == {"weather__forecast", "weather__air_quality", "weather__slow", "weather__learn",
                              "weather__crash"}  # 'air.quality' -> 'air_quality'
        forecast = tools["weather__forecast"]
        assert forecast.description == "Tomorrow's weather forecast for a city."
        assert forecast.parameters["required"] == ["city"]
        assert forecast.parameters["properties"]["city"]["description"] == "the city, e.g. Oslo"
        assert await forecast.run({"city": "Oslo"}, "box-1") == OSLO  # env reached the server
        assert await tools["weather__air_quality"].run({"city": "Oslo"}, "box-1") == "Oslo: air quality good (AQI 21)"


async def test_the_allow_list_limits_the_tools_the_llm_sees() -> None:
    async with running(weather(tools=("forecast",))) as clients:
        assert [t.name for t in clients.tools()] == ["weather__forecast"]


async def test_a_tool_that_raises_or_gets_bad_arguments_answers_the_model_with_an_error_text() -> None:
    async with running(weather()) as clients:
        box = Toolbox([], [clients])
        failed = await box.call("weather__forecast", '{"city": "Atlantis"}', "box-1")
        assert failed.startswith("error: ") and "no forecast for Atlantis: unknown city" in failed
        assert "city" in await box.call("weather__forecast", "{}", "box-1")
        assert (await box.call("weather__tomorrow", "{}", "box-1")).startswith(
            "error: MCP server 'weather' has no tool 'weather__tomorrow'; it offers: weather__forecast")


async def test_tools_a_server_adds_later_reach_the_llm_when_it_says_its_list_changed() -> None:
    async with running(weather()) as clients:
        box = Toolbox([], [clients])
        assert await box.call("weather__learn", '{"word": "hello"}', "box-1") == "learned hello"
        await asyncio.wait_for(clients.servers["weather"].tools_changed.wait(), 10)
        assert "weather__hello" in [s["function"]["name"] for s in box.schemas()]
        assert await box.call("weather__hello", "{}", "box-1") == "hello!"


async def test_a_tool_that_does_not_answer_in_time_gives_the_model_a_timeout_error() -> None:
    async with running(weather(timeout_s=0.3)) as clients:
        assert await Toolbox([], [clients]).call("weather__slow", '{"seconds": 5}', "box-1") == (
            "error: MCP server 'weather' did not answer slow within 0.3 s")
        assert await clients.servers["weather"].call("forecast", {"city": "Oslo"}) == OSLO  # still serving


async def test_a_streamable_http_server_behind_a_bearer_token_serves_its_tools(monkeypatch, caplog) -> None:
    monkeypatch.setenv("WEATHER_TOKEN", TOKEN)
    async with http_weather() as url:
        cfg = parse_config({"brain": {"mcp_servers": [
            {"name": "weather", "url": url, "headers": {"Authorization": "Bearer ${WEATHER_TOKEN}"}},
            {"name": "intruder", "url": url, "headers": {"Authorization": "Bearer wrong-token"}}]}})
        with caplog.at_level(logging.WARNING):
            async with running(*cfg.brain.mcp_servers) as clients:
                assert await Toolbox([], [clients]).call("weather__forecast", '{"city": "Oslo"}', "box-1") == (
                    "Oslo: 18 degrees and light rain tomorrow")
                intruder = clients.servers["intruder"]
                await asyncio.wait_for(intruder.attempt_failed.wait(), 10)
                assert not intruder.connected.is_set() and intruder.tools() == []
                assert "mcp client intruder: " in caplog.text and "401" in caplog.text
                why = await Toolbox([], [clients]).call("intruder__forecast", "{}", "box-1")
                assert why.startswith("error: MCP server 'intruder' is not connected (") and "401" in why


async def test_an_sse_server_serves_its_tools_too() -> None:
    async with http_weather() as url:
        cfg = McpServerConfig(name="weather", url=url.removesuffix("/mcp") + "/sse", transport="sse",
                              headers={"Authorization": f"Bearer {TOKEN}"})
        async with running(cfg) as clients:
            assert await Toolbox([], [clients]).call("weather__forecast", '{"city": "Oslo"}', "box-1") == (
                "Oslo: 18 degrees and light rain tomorrow")


async def test_an_http_server_that_goes_away_gives_the_model_an_error_and_is_reconnected_when_back(
        monkeypatch, caplog) -> None:
    monkeypatch.setattr("gateway.mcp_server.http.SHUTDOWN_GRACE_S", 0.2)  # our client holds a GET stream open
    server, ready = build(), asyncio.Event()
    serving = asyncio.create_task(serve_http(server, "127.0.0.1", 0, TOKEN, ready))
    await asyncio.wait_for(ready.wait(), 10)
    port = server.settings.port
    cfg = McpServerConfig(name="weather", url=f"http://127.0.0.1:{port}/mcp", headers={"Authorization": f"Bearer {TOKEN}"})
    async with running(cfg) as clients:
        weather_server = clients.servers["weather"]
        assert await weather_server.call("forecast", {"city": "Oslo"}) == "Oslo: 18 degrees and light rain tomorrow"
        serving.cancel()
        await asyncio.gather(serving, return_exceptions=True)
        with caplog.at_level(logging.WARNING, logger="gateway.brain.mcp_client"):
            gone = await weather_server.call("forecast", {"city": "Oslo"})
            await asyncio.wait_for(weather_server.attempt_failed.wait(), 10)
        assert gone.startswith("error: MCP server 'weather' ") and ("lost the connection" in gone or "not connected" in gone)
        assert any(r.getMessage().startswith("mcp client weather: ") for r in caplog.records if r.levelno == logging.WARNING)
        async with http_weather(port):
            await asyncio.wait_for(weather_server.connected.wait(), 10)
            assert await weather_server.call("forecast", {"city": "Bergen"}) == "Bergen: 18 degrees and light rain tomorrow"


async def test_the_llm_asks_for_an_mcp_tool_gets_its_result_and_the_reply_is_spoken() -> None:
    async with running(weather()) as clients, ScriptedLlm([
            Script(tool_calls=[("weather__forecast", '{"city": "Oslo"}')]),
            Script(["Tomorrow it will rain in Oslo."])]) as llm:
        brain = CloudBrain(local(), [provider("a", llm.url)], tools=Toolbox([], [clients]))
        assert await collect(ask(brain, "will it rain in oslo tomorrow")) == ["Tomorrow it will rain in Oslo."]
        offered = {t["function"]["name"]: t["function"] for t in llm.requests[0]["tools"]}
        assert offered["weather__forecast"]["description"] == "Tomorrow's weather forecast for a city."
        assert tool_results(llm.requests[1]) == [OSLO]
        await brain.close()


async def test_a_server_that_dies_answers_with_an_error_is_logged_once_and_is_reconnected(caplog) -> None:
    async with running(weather()) as clients:
        server = clients.servers["weather"]
        with caplog.at_level(logging.WARNING):
            died = await Toolbox([], [clients]).call("weather__crash", "{}", "box-1")
            await asyncio.wait_for(server.attempt_failed.wait(), 10)
        assert died == "error: MCP server 'weather' lost the connection during crash; try again later"
        warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
        assert warnings == ["mcp client weather: the server closed the connection; reconnecting with back-off"]
        await asyncio.wait_for(server.connected.wait(), 20)
        assert await server.call("forecast", {"city": "Oslo"}) == OSLO


async def test_a_missing_server_is_logged_once_while_retrying_and_its_tools_say_why(caplog) -> None:
    missing = McpServerConfig(name="ghost", command=("/nonexistent/mcp-ghost",))
    with caplog.at_level(logging.DEBUG, logger="gateway.brain.mcp_client"):
        async with running(missing, wait_for=()) as clients:
            for _ in range(3):  # three failed attempts
                await asyncio.wait_for(clients.servers["ghost"].attempt_failed.wait(), 10)
                clients.servers["ghost"].attempt_failed.clear()
            why = await Toolbox([], [clients]).call("ghost__lookup", "{}", "box-1")
    assert why == ("error: MCP server 'ghost' is not connected (FileNotFoundError: [Errno 2] No such file or "
                   "directory: '/nonexistent/mcp-ghost'); try again later or do without it")
    warned = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 1 and "mcp client ghost: FileNotFoundError" in warned[0].getMessage()


async def test_a_prestart_entry_may_name_an_mcp_tool_with_the_question() -> None:
    async with ScriptedLlm([Script(["Bring an umbrella."])]) as llm:
        cfg = parse_config({"brain": {
            "providers": [{"name": "scripted", "base_url": llm.url, "model": "m", "api_key": "k"}],
            "system_prompt": "P", "mcp_servers": [{"name": "weather", "command": WEATHER}],
            "prestart": [{"tool": "weather__forecast", "arguments": {"city": "{{question}}"}}]}}, ROOT)
        clients = build_mcp_clients(cfg)
        assert clients is not None
        brain = build_brain(cfg, None, mcp=clients)  # built before its only tools exist (as in Gateway)
        task = asyncio.create_task(clients.run())
        await asyncio.wait_for(clients.servers["weather"].connected.wait(), 20)
        assert await collect(ask(brain, "Bergen")) == ["Bring an umbrella."]
        assert llm.requests[0]["messages"][0]["content"] == (
            "P\n\nContext from weather__forecast:\nBergen: 18 degrees and light rain tomorrow")
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await brain.close()


async def test_the_gateway_answers_when_an_mcp_server_is_missing_and_the_model_sees_why(fake_runner, tmp_path, caplog) -> None:
    async with ScriptedLlm([Script(tool_calls=[("ghost__lookup", '{"q": "umbrella"}'),
                                               ("weather__forecast", '{"city": "Oslo"}')]),
                            Script(["Take an umbrella to Oslo."])]) as llm:
        cfg = parse_config({
            "devices": {"database": str(tmp_path / "gw.db")}, "memory": {"enabled": False},
            "brain": {"providers": [{"name": "scripted", "base_url": llm.url, "model": "m"}],
                      "mcp_servers": [{"name": "ghost", "command": ["/nonexistent/mcp-ghost"]},
                                      {"name": "weather", "command": WEATHER}]}}, ROOT)
        link, ready = MemoryLink(), asyncio.Event()
        gateway = Gateway(cfg, fake_runner, [link])
        task = asyncio.create_task(gateway.serve(ready))
        try:
            await asyncio.wait_for(ready.wait(), 10)
            assert gateway.mcp_clients is not None
            await asyncio.wait_for(gateway.mcp_clients.servers["weather"].connected.wait(), 20)
            await asyncio.wait_for(gateway.mcp_clients.servers["ghost"].attempt_failed.wait(), 10)
            dev = link.connect()
            await dev.send(Hello(device_id="mcp-box"))
            assert isinstance(await asyncio.wait_for(dev.receive(), 10), Welcome)
            await dev.send(TextInput(text="should I take an umbrella to oslo"))
            while not isinstance(reply := await asyncio.wait_for(dev.receive(), 10), ReplyText):
                pass
            assert reply.text == "Take an umbrella to Oslo."
            ghost, forecast = tool_results(llm.requests[1])
            assert ghost.startswith("error: MCP server 'ghost' is not connected (FileNotFoundError")
            assert forecast == "Oslo: 18 degrees and light rain tomorrow"
            assert "mcp client ghost: FileNotFoundError" in caplog.text
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


@pytest.mark.parametrize(("server", "problem"), [
    ({"name": "weather"}, "brain.mcp_servers.0: MCP server 'weather': give either command"),
    ({"name": "weather", "command": ["x"], "url": "http://h/mcp"}, "give either command"),
    ({"name": "we ather", "command": ["x"]}, "brain.mcp_servers.0.name: name 'we ather': use 1-24 letters"),
    ({"name": "a__b", "command": ["x"]}, "single '_'"),
    ({"name": "w", "url": "ftp://h/mcp"}, "url 'ftp://h/mcp' must start with http:// or https://"),
    ({"name": "w", "url": "http://h/mcp", "env": {"A": "1"}}, "env is for command servers"),
    ({"name": "w", "command": ["x"], "headers": {"A": "1"}}, "headers are for url servers"),
    ({"name": "w", "command": ["x"], "timeout_s": 0}, "brain.mcp_servers.0.timeout_s = 0"),
    ({"name": "w", "command": ["x"], "transport": "sse"}, "transport sse is for url servers"),
    ({"name": "w", "url": "http://h/sse", "transport": "websocket"}, "brain.mcp_servers.0.transport = 'websocket'"),
])
def test_a_bad_mcp_server_entry_names_the_key_and_what_to_do(server: dict, problem: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config({"brain": {"mcp_servers": [server]}})
    assert problem in str(info.value)


def test_two_mcp_servers_with_one_name_are_refused() -> None:
    with pytest.raises(ConfigError, match=r"MCP server names must be unique .* rename \['w'\]"):
        parse_config({"brain": {"mcp_servers": [{"name": "w", "command": ["x"]}, {"name": "w", "url": "http://h"}]}})


def test_without_an_llm_no_mcp_server_is_started() -> None:
    cfg = parse_config({"brain": {"mcp_servers": [{"name": "weather", "command": WEATHER}]}})
    assert build_mcp_clients(cfg) is None


def test_gateway_doctor_reports_each_mcp_server_with_its_tools_or_why_not() -> None:
    from gateway.cli.doctor import run_doctor

    cfg = parse_config({"brain": {"mcp_servers": [{"name": "weather", "command": WEATHER, "tools": ["forecast"]},
                                                  {"name": "ghost", "command": ["/nonexistent/mcp-ghost"]}]}}, ROOT)
    lines: list[str] = []
    run_doctor(cfg, lines.append)
    assert "OK   MCP server weather: tools weather__forecast" in lines
    ghost = lines.index("WARN MCP server ghost: not reachable: FileNotFoundError: [Errno 2] No such file or "
                        "directory: '/nonexistent/mcp-ghost'")
    assert lines[ghost + 1] == "     -> fix its command / url / headers in brain.mcp_servers, or start that server"
