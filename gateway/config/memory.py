"""The memory's sections of gateway.yaml: `memory` (with the rules written at start) and `mcp`
(the MCP endpoint over the memory and the devices). See docs/CONFIG.md and docs/MEMORY.md.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator

from gateway.config.base import _Section


class MemoryRuleConfig(_Section):
    """A persistent rule written into the user's memory at start (see docs/MEMORY.md)."""

    user: str = Field(pattern=r"^[A-Za-z0-9_.@-]{1,64}$")
    text: str = Field(min_length=1, max_length=500)  # what is said when it fires
    reading: str = Field(pattern=r"^[a-z][a-z0-9_]{0,31}$")  # the reading kind, e.g. blood_pressure
    above: str = Field("", pattern=r"^(\d+(\.\d+)?(/\d+(\.\d+)?)?)?$")  # "140/90" or "38.5"
    before: str = Field("", pattern=r"^(([01]\d|2[0-3]):[0-5]\d)?$")  # "09:00"

    @model_validator(mode="after")
    def _one_condition(self) -> "MemoryRuleConfig":
        if bool(self.above) == bool(self.before):
            raise ValueError("a rule needs exactly one of above (a threshold) or before (a daily deadline)")
        return self


class MemoryConfig(_Section):
    enabled: bool = True
    path: Path = Path("data/memory.db")
    embedding: Literal["all-minilm-l6-v2-int8", "multilingual-e5-small"] = "all-minilm-l6-v2-int8"
    isolate_by_user: bool = True
    default_user: str = Field("household", pattern=r"^[A-Za-z0-9_.@-]{1,64}$")
    users: dict[str, str] = {}  # device id -> user id
    search_weights: tuple[float, float, float] = (0.0, 1.0, 0.5)  # recency, relevance, importance
    conversation_weights: tuple[float, float, float] = (0.8, 0.5, 0.5)
    recency_half_life_h: float = Field(24.0, gt=0, le=24 * 365)
    reflection_time: str = Field("23:00", pattern=r"^([01]\d|2[0-3]):[0-5]\d$")
    portrait_time: str = Field("22:35", pattern=r"^([01]\d|2[0-3]):[0-5]\d$")
    rules: tuple[MemoryRuleConfig, ...] = ()


class McpConfig(_Section):
    http: bool = False
    host: str = "127.0.0.1"
    port: int = Field(8766, ge=0, le=65535)
    token: str = ""

    @model_validator(mode="after")
    def _token_when_http(self) -> "McpConfig":
        if self.http and len(self.token) < 16:
            raise ValueError("mcp.http is on, so mcp.token must be set (16+ characters, e.g. ${GATEWAY_MCP_TOKEN})")
        return self
