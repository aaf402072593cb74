"""Console API for the action rules (`expression.action_rules`, config/action_rules.csv): which
Action code a spoken sentence carries. Checked by the parser the expression layer loads the file
with (gateway/expression/rules.py); used from the next sentence on (`ActionRules` re-reads the
file when it changes).

The file itself tolerates a broken row (it is logged and skipped); from the console a table with
any problem is refused whole, so what the page saves is exactly what the gateway will use.

    GET  actions          {"path", "text", "codes": [codes]}
    POST actions/check    {"text"} -> {"ok": true, "codes", "warnings"} or 400 with "problems": [{line, message}]
    POST actions          {"text"} -> the file replaced (atomically); with a problem: 400, the file unchanged

`warnings` name the codes other files use that the table does not have (the hints of
expression.hints, the device tools of xiaozhi.device_actions): saved anyway, as the files allow.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from gateway.console.file_save import save_text
from gateway.console.routes import ApiError, ApiRequest, Routes, text_field
from gateway.expression.rules import ActionRule, parse_rules

log = logging.getLogger(__name__)

MAX_TEXT = 512 * 1024


def check(text: str) -> list[ActionRule]:
    """The rules of `text`, or ApiError 400 naming every problem and its line (the first one's line
    also as `line`)."""
    rules, problems = parse_rules(text)
    if not problems and not rules:
        problems_out = [{"line": 1, "message": "no rules: add a row under the header"}]
    else:
        problems_out = [{"line": p.line, "message": p.text} for p in problems]
    if problems_out:
        first = problems_out[0]
        more = f" (and {len(problems_out) - 1} more)" if len(problems_out) > 1 else ""
        raise ApiError(400, f"line {first['line']}: {first['message']}{more}", "text", first["line"], problems_out)
    return rules


class ActionsApi:
    def __init__(self, path: Path, used_elsewhere: Callable[[], Mapping[str, set[str]]] = dict) -> None:
        self._path = path
        self._used_elsewhere = used_elsewhere  # file -> the action codes it names (read on a thread)

    async def _warnings(self, rules: list[ActionRule]) -> list[str]:
        codes = {r.action.code for r in rules}
        used = await asyncio.to_thread(self._used_elsewhere)
        return [f"{where} names action {code!r}, which this table does not have"
                for where, named in used.items() for code in sorted(named - codes)]

    def routes(self) -> Routes:
        return {("GET", "actions"): self.get, ("POST", "actions/check"): self.check, ("POST", "actions"): self.save}

    async def get(self, request: ApiRequest) -> dict[str, Any]:
        text = await asyncio.to_thread(self._path.read_text, encoding="utf-8")
        rules, problems = await asyncio.to_thread(parse_rules, text)  # up to MAX_TEXT of CSV: off the loop
        return {"path": str(self._path), "text": text, "codes": [r.action.code for r in rules],
                "problems": [{"line": p.line, "message": p.text} for p in problems]}

    def _text(self, request: ApiRequest) -> str:
        text_field(request.body, "text", max_len=MAX_TEXT)  # a non-empty string, not too long
        text = request.body["text"]  # as typed
        return text if text.endswith("\n") else text + "\n"

    async def check(self, request: ApiRequest) -> dict[str, Any]:
        rules = await asyncio.to_thread(check, self._text(request))
        return {"ok": True, "codes": [r.action.code for r in rules], "warnings": await self._warnings(rules)}

    async def save(self, request: ApiRequest) -> dict[str, Any]:
        text = self._text(request)
        rules = await asyncio.to_thread(check, text)
        await asyncio.to_thread(save_text, self._path, text)
        log.info("%s: action rules %s replaced (%d rules); used from the next sentence", request.peer, self._path,
                 len(rules))
        warnings = await self._warnings(rules)
        for warning in warnings:
            log.warning("action rules %s: %s", self._path, warning)
        return {"ok": True, "codes": [r.action.code for r in rules], "warnings": warnings}
