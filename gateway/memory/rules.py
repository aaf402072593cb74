"""Persistent rules that fire alerts, evaluated inside the gateway.

A rule is a memory node tagged `kind:rule` + `persistent:true` (written from MCP, the CLI or
`memory.rules` in the config, see `install_rules`) whose machine-readable part is in tags:

- threshold: `reading:<kind>` + `above:<v>` (or `above:<v1>/<v2>` for blood pressure: systolic /
  diastolic, either crossing fires) -> checked on every new reading of that kind;
- deadline: `reading:<kind>` + `schedule:before:HH:MM` -> at HH:MM (local), if no reading of
  that kind arrived today, a reminder fires (once per day).

The rule's own content is what is said, with the reading appended, e.g. "Blood pressure above
140/90: tell Anna to rest (blood pressure 152 over 93 mmHg)". Time comes from the injected clock.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta
from typing import Any

from gateway.memory.events import Alert
from gateway.memory.service import MemoryService
from gateway.memory.store import Node

log = logging.getLogger(__name__)

_NUMS = re.compile(r"(\d+(?:\.\d+)?)")
_BP = re.compile(r"(\d+(?:\.\d+)?) over (\d+(?:\.\d+)?)")


def _tag(node: Node, ns: str) -> str | None:
    return next((t.split(":", 1)[1] for t in node.tags if t.startswith(ns + ":")), None)


def is_reading(node: Node) -> bool:
    """A sensor-reading observation (not a rule or insight that merely mentions the kind)."""
    return node.type == "observation" and "kind:event" in node.tags and _tag(node, "reading") is not None


def _reading_values(content: str) -> list[float]:
    text = content.split(", measured")[0]
    m = _BP.search(text)
    return [float(m.group(1)), float(m.group(2))] if m else [float(x) for x in _NUMS.findall(text)[:1]]


def crosses(limit: str, values: list[float]) -> bool:
    """`above:140/90` against [152, 88] -> True (any part above its limit)."""
    try:
        limits = [float(x) for x in limit.split("/")]
    except ValueError:
        return False
    return any(v > lim for v, lim in zip(values, limits))


def deadline_of(rule: Node) -> tuple[int, int] | None:
    when = _tag(rule, "schedule")
    m = re.fullmatch(r"before:(\d{1,2}):(\d{2})", when or "")
    return (int(m.group(1)), int(m.group(2))) if m else None


class RuleEngine:
    def __init__(self, memory: MemoryService, publish: Callable[[Alert], None],
                 devices_of: Callable[[str], tuple[str, ...]]) -> None:
        self.memory = memory
        self.publish = publish
        self.devices_of = devices_of
        self._reminded: set[tuple[int, str]] = set()  # (rule id, day) already reminded

    async def _fire(self, user: str, rule: Node, text: str, severity: str) -> Alert:
        alert = Alert(user, self.devices_of(user), text, rule.id, severity, self.memory.clock())
        await self.memory.remember(user, f"Alert: {text}", kind="event", source="rules",
                                   extra_tags=[f"alert:{rule.id}", *[t for t in rule.tags if t.startswith("domain:")]])
        log.info("rule %d fired for %s: %s", rule.id, user, text)
        self.publish(alert)
        return alert

    async def on_reading(self, node: Node) -> list[Alert]:
        """Threshold rules of the node's user and reading kind."""
        kind = _tag(node, "reading")
        if kind is None or not is_reading(node):
            return []
        fired = []
        for rule in await self.memory.active_rules(node.user_id):
            limit = _tag(rule, "above")
            if limit and _tag(rule, "reading") == kind and crosses(limit, _reading_values(node.content)):
                what = node.content.split(", measured")[0]
                said = rule.content.strip()
                text = f"{said} The reading: {what}." if said[-1:] in ".!?" else f"{said} ({what})"
                fired.append(await self._fire(node.user_id, rule, text, "warning"))
        return fired

    async def check_deadlines(self, now: datetime) -> list[Alert]:
        """Deadline rules whose time has passed today without a reading of their kind."""
        fired = []
        day = now.date().isoformat()
        start = now.replace(hour=0, minute=0, second=0, microsecond=0)
        for user in await self.memory.known_users():
            for rule in await self.memory.active_rules(user):
                hm, kind = deadline_of(rule), _tag(rule, "reading")
                if hm is None or kind is None or (rule.id, day) in self._reminded:
                    continue
                if now < start + timedelta(hours=hm[0], minutes=hm[1]):
                    continue
                self._reminded.add((rule.id, day))
                got = await self.memory.recent(user, 1, all_of=[f"reading:{kind}", "kind:event"], since=start.timestamp())
                if not got:
                    fired.append(await self._fire(user, rule, rule.content, "reminder"))
        return fired

    def next_deadline(self, now: datetime, rules: list[Node]) -> datetime | None:
        """The next HH:MM among deadline rules, after now."""
        times = []
        for rule in rules:
            hm = deadline_of(rule)
            if hm:
                t = now.replace(hour=hm[0], minute=hm[1], second=0, microsecond=0)
                times.append(t if t > now else t + timedelta(days=1))
        return min(times, default=None)


async def install_rules(memory: MemoryService, rules: Iterable[Any]) -> list[Node]:
    """Write the rules of `memory.rules` (config) as rule nodes, once: a rule already in the
    user's memory with the same text and tags is not written again. Returns the new nodes."""
    written = []
    for r in rules:
        cond = f"above:{r.above}" if r.above else f"schedule:before:{r.before}"
        tags = sorted([f"reading:{r.reading}", cond])
        existing = await memory.active_rules(r.user)
        if any(n.content == r.text and set(tags) <= set(n.tags) for n in existing):
            continue
        written.append(await memory.remember(r.user, r.text, kind="rule", source="config", persistent=True,
                                             extra_tags=tags, importance=9))
    return written
