"""Editing the alert rules of a person (the console's Memory page): list them with when each
fired, create, change, disable / enable and delete, all through the MemoryService.

A rule is checked exactly like one in gateway.yaml's `memory.rules` (MemoryRuleConfig: the
reading kind, a threshold `above` such as "140/90" or a daily deadline `before` such as "09:00",
the text said when it fires), then like any memory (node_input); a bad rule raises RuleInputError
naming the field and nothing is written. A disabled rule keeps its tags plus `state:disabled`, so
the rule engine skips it and `install_rules` does not write a gateway.yaml rule again. A change
keeps the rule's id: its firings (the alert nodes tagged `alert:<id>`, written by the rule engine
when it fires) stay with it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from gateway.config.memory import MemoryRuleConfig
from gateway.memory.errors import MemoryInputError
from gateway.memory.node_input import check_user
from gateway.memory.rules import _tag, condition_tags
from gateway.memory.service import MemoryService
from gateway.memory.nodes import Node
from gateway.memory.tags import DISABLED

RULE_IMPORTANCE = 9  # as install_rules writes them
HINTS = {
    "reading": "the reading kind: lower-case letters, digits and _, e.g. blood_pressure",
    "above": 'a threshold: a number, or two separated by "/" for blood pressure, e.g. 140/90 or 38.5',
    "before": "a daily deadline HH:MM, e.g. 09:00",
    "text": "what is said when it fires: 1 to 500 characters",
}


class RuleInputError(MemoryInputError):
    """A rule the book refuses, naming the field (reading, above, before, text, id)."""

    def __init__(self, text: str, field: str | None = None) -> None:
        super().__init__(text)
        self.field = field


class NoSuchRule(RuleInputError):
    """The person has no rule with that id (deleted meanwhile, or another person's)."""

    def __init__(self, user: str, rule_id: int) -> None:
        super().__init__(f"{user} has no rule #{rule_id}", "id")


@dataclass(frozen=True)
class RuleDraft:
    text: str
    reading: str
    above: str = ""
    before: str = ""


def check_rule(user: str, draft: RuleDraft) -> MemoryRuleConfig:
    """The rule as gateway.yaml's memory.rules would take it, or RuleInputError."""
    try:
        check_user(user)
    except MemoryInputError as exc:
        raise RuleInputError(exc.text, "person") from None
    fields = {"text": draft.text, "reading": draft.reading, "above": draft.above, "before": draft.before}
    if bad := [k for k, v in fields.items() if not isinstance(v, str)]:
        raise RuleInputError(f"{bad[0]}: a string is needed", bad[0])
    try:
        return MemoryRuleConfig(user=user, **{k: v.strip() for k, v in fields.items()})
    except ValidationError as exc:
        first = exc.errors()[0]
        field = str(first["loc"][0]) if first["loc"] else None
        if field in HINTS:
            raise RuleInputError(f"{field}: {HINTS[field]}", field) from None
        raise RuleInputError(first["msg"].removeprefix("Value error, "), "above") from None


def describe(rule: Node, firings: list[Node]) -> dict[str, Any]:
    """A rule as the console shows it."""
    before = (_tag(rule, "schedule") or "").removeprefix("before:")
    return {"id": rule.id, "text": rule.content, "reading": _tag(rule, "reading") or "",
            "above": _tag(rule, "above") or "", "before": before if _tag(rule, "schedule") else "",
            "enabled": DISABLED not in rule.tags, "source": _tag(rule, "source") or "", "created": rule.created,
            "last_fired": firings[0].ts if firings else None,
            "firings": [{"id": f.id, "ts": f.ts, "text": f.content.removeprefix("Alert: ")} for f in firings]}


class RuleBook:
    def __init__(self, memory: MemoryService, source: str = "console") -> None:
        self.memory = memory
        self.source = source  # the source: tag of the rules it writes

    async def list(self, user: str, firings: int = 5) -> list[dict[str, Any]]:
        check_user(user)
        return [describe(rule, await self.memory.firings(user, rule.id, firings)) for rule in await self.memory.rules(user)]

    async def _rule(self, user: str, rule_id: Any) -> Node:
        if not isinstance(rule_id, int) or isinstance(rule_id, bool) or rule_id < 1:
            raise RuleInputError("id: the rule's number", "id")
        found = [r for r in await self.memory.rules(user) if r.id == rule_id]
        if not found:
            raise NoSuchRule(user, rule_id)
        return found[0]

    async def create(self, user: str, draft: RuleDraft) -> Node:
        r = check_rule(user, draft)
        return await self.memory.remember(user, r.text, kind="rule", source=self.source, persistent=True,
                                          extra_tags=condition_tags(r.reading, r.above, r.before),
                                          importance=RULE_IMPORTANCE)

    async def _rewrite(self, rule: Node, text: str, tags: list[str]) -> Node:
        keep = [t for t in rule.tags if not t.startswith(("kind:", "source:", "persistent:", "reading:", "above:",
                                                          "schedule:", "state:"))]
        node = await self.memory.rewrite(rule.user_id, rule.id, text, kind="rule", source=_tag(rule, "source"),
                                         persistent=True, extra_tags=[*keep, *tags], importance=rule.importance)
        if node is None:  # deleted meanwhile
            raise NoSuchRule(rule.user_id, rule.id)
        return node

    async def update(self, user: str, rule_id: Any, draft: RuleDraft) -> Node:
        r = check_rule(user, draft)
        rule = await self._rule(user, rule_id)
        state = [] if DISABLED not in rule.tags else [DISABLED]
        return await self._rewrite(rule, r.text, [*condition_tags(r.reading, r.above, r.before), *state])

    async def set_enabled(self, user: str, rule_id: Any, enabled: bool) -> Node:
        rule = await self._rule(user, rule_id)
        cond = [t for t in rule.tags if t.startswith(("reading:", "above:", "schedule:"))]
        return await self._rewrite(rule, rule.content, cond if enabled else [*cond, DISABLED])

    async def delete(self, user: str, rule_id: Any) -> Node:
        rule = await self._rule(user, rule_id)
        if not await self.memory.forget(user, rule.id):
            raise NoSuchRule(user, rule.id)
        return rule
