"""A tiny external MCP server for the tests (FastMCP, official SDK): `python mcp_weather_server.py`
serves it over stdio; the tests also serve `build()` over streamable HTTP on 127.0.0.1."""

from __future__ import annotations

import asyncio
import os
from typing import Annotated

from mcp.server.fastmcp import Context, FastMCP
from pydantic import Field


def build() -> FastMCP:
    server = FastMCP("weather")

    @server.tool()
    def forecast(city: Annotated[str, Field(description="the city, e.g. Oslo")]) -> str:
        """Tomorrow's weather forecast for a city."""
        if city.lower() == "atlantis":
            raise ValueError(f"no forecast for {city}: unknown city")
        unit = os.environ.get("WEATHER_UNIT", "degrees")
        return f"{city}: 18 {unit} and light rain tomorrow"

    @server.tool(name="air.quality")
    def air_quality(city: str) -> str:
        """Air quality index (a tool name with a dot, which OpenAI function names do not allow)."""
        return f"{city}: air quality good (AQI 21)"

    @server.tool()
    async def slow(seconds: float) -> str:
        """Answers after `seconds` (tests the client's timeout)."""
        await asyncio.sleep(seconds)  # the tool's own pace
        return "finally"

    @server.tool()
    async def learn(word: str, ctx: Context) -> str:
        """Adds a tool named `word` and tells the client that the tool list changed."""
        server.add_tool(lambda: f"{word}!", name=word, description=f"Says {word}.")
        await ctx.session.send_tool_list_changed()
        return f"learned {word}"

    @server.tool()
    def crash() -> str:
        """Ends the server process at once (tests a server that dies)."""
        os._exit(3)

    return server


if __name__ == "__main__":
    build().run()  # stdio
