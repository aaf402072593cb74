"""Action codes -> a device tool call, without the LLM (config/device_actions.yaml).

When a spoken sentence's Action code (gateway/expression) has a row here and the device offers
that tool, the tool is called as the sentence starts, so a xiaozhi robot waves on "hello". A row:

    greeting.hello:
      tool: self.otto.action
      arguments: {action: hand_wave, direction: 1}

Loaded once at start; a bad row is logged with its line number and skipped, a missing or
unreadable file gives an empty table (logged).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

log = logging.getLogger(__name__)

_CODE = re.compile(r"^[a-z][a-z0-9_]*\.[a-z0-9_.]+$")


@dataclass(frozen=True)
class ToolCall:
    tool: str
    arguments: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class DeviceActions:
    calls: dict[str, ToolCall] = field(default_factory=dict)  # action code -> tool call

    def for_code(self, code: str | None) -> ToolCall | None:
        return self.calls.get(code) if code else None

    @classmethod
    def load(cls, path: Path) -> "DeviceActions":
        try:
            text = path.read_text(encoding="utf-8")
            root = yaml.compose(text)
        except (OSError, yaml.YAMLError) as exc:
            log.error("%s: cannot read the device actions (%s); Action codes call no device tools", path, exc)
            return cls()
        if root is None:
            return cls()
        if not isinstance(root, yaml.MappingNode):
            log.error("%s:%d: expected a mapping of action code: {tool, arguments}", path, root.start_mark.line + 1)
            return cls()
        calls: dict[str, ToolCall] = {}
        for key, value in root.value:
            line = key.start_mark.line + 1
            try:
                calls[_code(key)] = _call(value)
            except ValueError as exc:
                log.warning("%s:%d: %s; row skipped", path, line, exc)
        log.info("device actions %s: %d rows loaded", path, len(calls))
        return cls(calls)


def _code(key: yaml.Node) -> str:
    if not isinstance(key, yaml.ScalarNode) or not _CODE.fullmatch(key.value):
        shown = key.value if isinstance(key, yaml.ScalarNode) else "a list or mapping"
        raise ValueError(f"{shown!r} is not an action code such as greeting.hello")
    return key.value


def _call(node: yaml.Node) -> ToolCall:
    value = yaml.safe_load(yaml.serialize(node))
    if not isinstance(value, dict):
        raise ValueError("expected a mapping with tool: and arguments:")
    if unknown := set(value) - {"tool", "arguments"}:
        raise ValueError(f"unknown keys {', '.join(sorted(map(str, unknown)))} (expected tool and arguments)")
    tool, arguments = value.get("tool"), value.get("arguments", {})
    if not isinstance(tool, str) or not tool.strip():
        raise ValueError("tool: must name a device tool, e.g. self.otto.action")
    if not isinstance(arguments, dict):
        raise ValueError("arguments: must be a mapping (the tool's JSON arguments)")
    return ToolCall(tool.strip(), arguments)
