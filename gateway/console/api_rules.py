"""Console API for a person's alert rules, through the RuleBook over the MemoryService (the rules
the rule engine fires and the MCP tools / `gateway memory` read), checked like gateway.yaml's
`memory.rules`; a refused rule changes nothing and the answer names the field.

    GET  rules?person=P                   {"rules": [{id, text, reading, above, before, enabled,
                                          source, last_fired, firings: [{ts, text}, ...]}, ...]}
    POST rules          {"person", "text", "reading", "above" | "before"}      a new rule
    POST rules/update   {"person", "id", "text", "reading", "above" | "before"} change it (its id
                                          and firings stay)
    POST rules/enable   {"person", "id", "enabled": true | false}
    POST rules/delete   {"person", "id"}
"""

from __future__ import annotations

import logging
from typing import Any

from gateway.console.routes import ApiError, ApiRequest, Routes
from gateway.memory.errors import MemoryInputError
from gateway.memory.rule_book import NoSuchRule, RuleBook, RuleDraft, RuleInputError, describe
from gateway.memory.nodes import Node

log = logging.getLogger(__name__)


def _body(request: ApiRequest) -> dict[str, Any]:
    if not isinstance(request.body, dict):
        raise ApiError(400, "the body must be a JSON object")
    person = request.body.get("person")
    if not isinstance(person, str) or not person:
        raise ApiError(400, "person: whose rules", "person")
    return request.body


def _draft(body: dict[str, Any]) -> RuleDraft:
    return RuleDraft(body.get("text", ""), body.get("reading", ""), body.get("above", ""), body.get("before", ""))


def _condition(rule: Node) -> str:
    d = describe(rule, [])
    return f"{d['reading']} above {d['above']}" if d["above"] else f"no {d['reading']} before {d['before']}"


class RulesApi:
    def __init__(self, book: RuleBook | None) -> None:
        self._book = book

    def routes(self) -> Routes:
        return {("GET", "rules"): self.list, ("POST", "rules"): self.create, ("POST", "rules/update"): self.update,
                ("POST", "rules/enable"): self.enable, ("POST", "rules/delete"): self.delete}

    def _rules(self) -> RuleBook:
        if self._book is None:
            raise ApiError(404, "the memory is off (memory.enabled in gateway.yaml): there are no rules")
        return self._book

    async def _call(self, fn: Any, *args: Any) -> Any:
        try:
            return await fn(*args)
        except NoSuchRule as exc:
            raise ApiError(404, exc.text, exc.field) from None
        except RuleInputError as exc:
            raise ApiError(400, exc.text, exc.field) from None
        except MemoryInputError as exc:
            raise ApiError(400, exc.text) from None

    async def list(self, request: ApiRequest) -> dict[str, Any]:
        person = request.query.get("person", "")
        if not person:
            raise ApiError(400, "person: whose rules (see GET people)", "person")
        return {"person": person, "rules": await self._call(self._rules().list, person)}

    async def create(self, request: ApiRequest) -> dict[str, Any]:
        book, body = self._rules(), _body(request)
        rule = await self._call(book.create, body["person"], _draft(body))
        log.info("%s: rule #%d of %s created (%s): %s", request.peer, rule.id, body["person"], _condition(rule), rule.content)
        return {"rule": describe(rule, [])}

    async def update(self, request: ApiRequest) -> dict[str, Any]:
        book, body = self._rules(), _body(request)
        rule = await self._call(book.update, body["person"], body.get("id"), _draft(body))
        log.info("%s: rule #%d of %s changed (%s): %s", request.peer, rule.id, body["person"], _condition(rule), rule.content)
        return {"rule": describe(rule, [])}

    async def enable(self, request: ApiRequest) -> dict[str, Any]:
        book, body = self._rules(), _body(request)
        enabled = body.get("enabled")
        if not isinstance(enabled, bool):
            raise ApiError(400, "enabled: true or false", "enabled")
        rule = await self._call(book.set_enabled, body["person"], body.get("id"), enabled)
        log.info("%s: rule #%d of %s %s", request.peer, rule.id, body["person"], "enabled" if enabled else "disabled")
        return {"rule": describe(rule, [])}

    async def delete(self, request: ApiRequest) -> dict[str, Any]:
        book, body = self._rules(), _body(request)
        rule = await self._call(book.delete, body["person"], body.get("id"))
        log.info("%s: rule #%d of %s deleted: %s", request.peer, rule.id, body["person"], rule.content)
        return {"deleted": rule.id}
