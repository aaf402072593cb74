"""Console API for the reply table (`brain.replies`), validated as the gateway validates the file
at start (gateway/brain/replies.py) and used from the next answer on (the local brain re-reads the
file when it changes).

    GET  replies          {"path", "text", "intents": [names]}
    POST replies/check    {"text"} -> {"ok": true, "intents"} or 400 with the error and its line
    POST replies          {"text"} -> the file replaced (atomically: gateway/console/file_save.py); a
                          text with an error: 400, the file unchanged

The YAML is parsed and checked off the event loop (a 60 KB table takes ~100 ms).
"""

from __future__ import annotations

import asyncio
import logging
import re
from pathlib import Path
from typing import Any

import yaml

from gateway.brain.replies import ReplyTable, parse_reply_table
from gateway.console.file_save import save_text
from gateway.console.routes import ApiError, ApiRequest, Routes, text_field
from gateway.errors import ConfigError

log = logging.getLogger(__name__)

MAX_TEXT = 512 * 1024
_INTENT = re.compile(r"intents\[(\d+)\]")


def _intent_line(text: str, index: int) -> int | None:
    """The 1-based line where intents[index] starts."""
    try:
        root = yaml.compose(text)
    except yaml.YAMLError:
        return None
    for key, value in getattr(root, "value", []) if isinstance(root, yaml.MappingNode) else []:
        if key.value == "intents" and isinstance(value, yaml.SequenceNode) and index < len(value.value):
            return value.value[index].start_mark.line + 1
    return None


def check(text: str, source: str) -> ReplyTable:
    """The table of `text`, or ApiError 400 with the problem and (when known) its line."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        raise ApiError(400, f"not valid YAML: {getattr(exc, 'problem', None) or exc}", "text", line) from None
    try:
        return parse_reply_table(data, source)
    except ConfigError as exc:
        found = _INTENT.search(str(exc))
        raise ApiError(400, str(exc), "text", _intent_line(text, int(found.group(1))) if found else None) from None


class RepliesApi:
    def __init__(self, path: Path) -> None:
        self._path = path

    def routes(self) -> Routes:
        return {("GET", "replies"): self.get, ("POST", "replies/check"): self.check, ("POST", "replies"): self.save}

    async def get(self, request: ApiRequest) -> dict[str, Any]:
        text = await asyncio.to_thread(self._path.read_text, encoding="utf-8")
        table = await asyncio.to_thread(check, text, str(self._path))
        return {"path": str(self._path), "text": text, "intents": [i.name for i in table.intents]}

    def _text(self, request: ApiRequest) -> str:
        text_field(request.body, "text", max_len=MAX_TEXT)  # a non-empty string, not too long
        text = request.body["text"]  # as typed: YAML indentation matters
        return text if text.endswith("\n") else text + "\n"

    async def check(self, request: ApiRequest) -> dict[str, Any]:
        table = await asyncio.to_thread(check, self._text(request), str(self._path))  # YAML: ~100 ms for 60 KB
        return {"ok": True, "intents": [i.name for i in table.intents]}

    async def save(self, request: ApiRequest) -> dict[str, Any]:
        text = self._text(request)
        table = await asyncio.to_thread(check, text, str(self._path))
        await asyncio.to_thread(save_text, self._path, text)
        log.info("%s: reply table %s replaced (%d intents); used from the next answer", request.peer, self._path,
                 len(table.intents))
        return {"ok": True, "intents": [i.name for i in table.intents]}
