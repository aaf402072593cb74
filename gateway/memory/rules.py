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
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from gateway.memory.events import Alert
from gateway.memory.node_input import NodeSpec, node_input
from gateway.memory.run_log import RunLog, RunLogInMemory
from gateway.memory.service import MemoryService
from gateway.memory.nodes import Node

log = logging.getLogger(__name__)

_NUMS = re.compile(r"(\d+(?:\.\d+)?)")
_BP = re.compile(r"(\d+(?:\.\d+)?) over (\d+(?:\.\d+)?)")


def _tag(node: Node | NodeSpec, ns: str) -> str | None:
    return next((t.split(":", 1)[1] for t in node.tags if t.startswith(ns + ":")), None)


def is_reading(node: Node | NodeSpec) -> bool:
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


def threshold_texts(rules: Sequence[Node], reading: Node | NodeSpec) -> list[tuple[Node, str]]:
    """The threshold rules this reading crosses, each with what to say (pure)."""
    kind = _tag(reading, "reading")
    if kind is None or not is_reading(reading):
        return []
    fired = []
    for rule in rules:
        limit = _tag(rule, "above")
        if limit and _tag(rule, "reading") == kind and crosses(limit, _reading_values(reading.content)):
            what = reading.content.split(", measured")[0]
            said = rule.content.strip()
            fired.append((rule, f"{said} The reading: {what}." if said[-1:] in ".!?" else f"{said} ({what})"))
    return fired


@dataclass(frozen=True)
class PendingAlert:
    """A rule that fired, before its observation is written (`node`, written with the reading)."""

    user_id: str
    rule: Node
    text: str
    severity: str
    node: NodeSpec


def deadline_of(rule: Node) -> tuple[int, int] | None:
    when = _tag(rule, "schedule")
    m = re.fullmatch(r"before:(\d{1,2}):(\d{2})", when or "")
    return (int(m.group(1)), int(m.group(2))) if m else None


class RuleEngine:
    def __init__(self, memory: MemoryService, publish: Callable[[Alert], None],
                 devices_of: Callable[[str], tuple[str, ...]], runs: RunLog | None = None) -> None:
        self.memory = memory
        self.publish = publish
        self.devices_of = devices_of
        # (rule id, day) already reminded: here, and (a cluster) in the shared RunLog, so the
        # member that takes the scheduler over does not remind again what another did today
        self._reminded: set[tuple[int, str]] = set()
        self.runs = runs if runs is not None else RunLogInMemory()

    def _pending(self, user: str, rule: Node, text: str, severity: str) -> PendingAlert:
        spec = node_input(user, f"Alert: {text}", now=self.memory.clock(), kind="event", source="rules",
                          extra_tags=[f"alert:{rule.id}", *[t for t in rule.tags if t.startswith("domain:")]])
        return PendingAlert(user, rule, text, severity, spec)

    def announce(self, pending: PendingAlert) -> Alert:
        """Publish a fired rule whose observation is written."""
        alert = Alert(pending.user_id, self.devices_of(pending.user_id), pending.text, pending.rule.id,
                      pending.severity, self.memory.clock())
        log.info("rule %d fired for %s: %s", pending.rule.id, pending.user_id, pending.text)
        self.publish(alert)
        return alert

    async def _fire(self, user: str, rule: Node, text: str, severity: str) -> Alert:
        pending = self._pending(user, rule, text, severity)
        await self.memory.remember_many([pending.node])
        return self.announce(pending)

    async def pending_alerts(self, readings: Sequence[Node | NodeSpec]) -> list[PendingAlert]:
        """The threshold rules these readings cross (each user's rules read once), in order, as
        alerts to write together with the readings and announce after the commit."""
        rules: dict[str, list[Node]] = {}
        out = []
        for reading in readings:
            if not is_reading(reading):
                continue
            if reading.user_id not in rules:
                rules[reading.user_id] = await self.memory.active_rules(reading.user_id)
            out += [self._pending(reading.user_id, rule, text, "warning")
                    for rule, text in threshold_texts(rules[reading.user_id], reading)]
        return out

    async def on_reading(self, node: Node) -> list[Alert]:
        """Threshold rules of the node's user and reading kind (a reading already written)."""
        pending = await self.pending_alerts([node])
        if pending:
            await self.memory.remember_many([p.node for p in pending])
        return [self.announce(p) for p in pending]

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
                if not await self.runs.first(f"reminder:{rule.id}", day):
                    continue
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


def condition_tags(reading: str, above: str, before: str) -> list[str]:
    """The machine-readable part of a rule (checked values, see MemoryRuleConfig): its reading
    kind and its threshold or deadline."""
    cond = f"above:{above}" if above else f"schedule:before:{before}"
    return sorted([f"reading:{reading}", cond])


async def install_rules(memory: MemoryService, rules: Iterable[Any]) -> list[Node]:
    """Write the rules of `memory.rules` (config) as rule nodes, once: a rule already in the
    user's memory with the same text and tags is not written again (nor one disabled in the
    console: it stays disabled). Returns the new nodes."""
    written = []
    for r in rules:
        tags = condition_tags(r.reading, r.above, r.before)
        existing = await memory.rules(r.user)
        if any(n.content == r.text and set(tags) <= set(n.tags) for n in existing):
            continue
        written.append(await memory.remember(r.user, r.text, kind="rule", source="config", persistent=True,
                                             extra_tags=tags, importance=9))
    return written
