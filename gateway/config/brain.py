"""The `brain:` section of gateway.yaml: reply table, LLM providers, tools (see docs/CONFIG.md)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator, model_validator

from gateway.config.base import _Section


class LlmProviderConfig(_Section):
    """One OpenAI-compatible chat endpoint (see docs/CONFIG.md, brain.providers)."""

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]{1,32}$")
    base_url: str = Field(pattern=r"^https?://\S+$")
    model: str = Field(min_length=1)
    api_key: str = ""  # write ${ENV_NAME}; never the key itself
    first_token_timeout_s: float = Field(3.0, gt=0, le=60)
    total_timeout_s: float = Field(30.0, gt=0, le=600)
    max_tokens: int = Field(300, ge=1, le=8192)
    stall_timeout_s: float = Field(1.0, gt=0, le=60)  # longest silence once the reply streams (a pulled network)
    cooldown_s: float = Field(30.0, ge=0, le=3600)  # skipped this long after a network failure (0 = never)


class PrestartToolConfig(_Section):
    """A tool called before the LLM on every LLM turn; `{{question}}` in an argument is the question."""

    tool: str = Field(pattern=r"^[A-Za-z0-9_.-]{1,64}$")
    arguments: dict[str, str] = {}
    keep_in_history: bool = False  # the result also stays in the conversation history (as a tool exchange)


class McpServerConfig(_Section):
    """An external MCP server whose tools the LLM may call (see docs/CONFIG.md, brain.mcp_servers)."""

    name: str
    command: tuple[str, ...] = ()  # stdio: [program, arg, ...]
    url: str = ""  # streamable HTTP: http(s)://host:port/mcp
    transport: Literal["streamable-http", "sse"] = "streamable-http"  # for a url server
    env: dict[str, str] = {}  # extra environment for a command server
    headers: dict[str, str] = {}  # HTTP headers for a url server, e.g. Authorization: "Bearer ${TOKEN}"
    tools: tuple[str, ...] = ()  # only these of the server's tools (empty: all)
    timeout_s: float = Field(10.0, gt=0, le=300)

    @field_validator("name")
    @classmethod
    def _tool_prefix(cls, value: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9-]+(_[A-Za-z0-9-]+)*", value) or len(value) > 24:
            raise ValueError(f"name {value!r}: use 1-24 letters, digits, '-' or single '_' "
                             "(the LLM sees the tools as <name>__<tool>)")
        return value

    @model_validator(mode="after")
    def _one_transport(self) -> "McpServerConfig":
        if bool(self.command) == bool(self.url):
            raise ValueError(f"MCP server {self.name!r}: give either command (a stdio server: "
                             "[program, arg, ...]) or url (a streamable HTTP server), exactly one")
        if self.url and not re.fullmatch(r"https?://\S+", self.url):
            raise ValueError(f"MCP server {self.name!r}: url {self.url!r} must start with http:// or https://")
        if self.url and self.env:
            raise ValueError(f"MCP server {self.name!r}: env is for command servers; send headers to a url server")
        if self.command and self.headers:
            raise ValueError(f"MCP server {self.name!r}: headers are for url servers; give a command server env")
        if self.command and self.transport != "streamable-http":
            raise ValueError(f"MCP server {self.name!r}: transport {self.transport} is for url servers "
                             "(a command server speaks stdio)")
        if self.command and not self.command[0].strip():
            raise ValueError(f"MCP server {self.name!r}: command[0] must be the program to run")
        return self


class BrainConfig(_Section):
    replies: Path = Path("config/replies.yaml")
    fallback: str = "Sorry, I did not catch that. You can ask me the time, the date, or just say hello."
    providers: tuple[LlmProviderConfig, ...] = ()
    system_prompt: str = (
        "You are a friendly voice assistant on a small speaker. Answer in one to three short spoken "
        "sentences, in the language of the question, without markdown, lists, code or links."
    )
    history_tokens: int = Field(1500, ge=0, le=100_000)
    split: Literal["sentence", "clause"] = "sentence"
    speculate: bool = True  # ask the LLM on the speculative transcript, before the endpoint
    prestart: tuple[PrestartToolConfig, ...] = ()
    route: Literal["local_first", "llm_first", "local_only"] = "local_first"
    interrupted_reply: str = Field("Sorry, I lost the connection.", min_length=1, max_length=300)
    mcp_servers: tuple[McpServerConfig, ...] = ()

    @field_validator("mcp_servers")
    @classmethod
    def _unique_mcp_names(cls, servers: tuple[McpServerConfig, ...]) -> tuple[McpServerConfig, ...]:
        names = [s.name for s in servers]
        if twice := sorted({n for n in names if names.count(n) > 1}):
            raise ValueError(f"MCP server names must be unique (they prefix the tool names); rename {twice}")
        return servers
