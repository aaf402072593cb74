"""What an API route gets and gives: a parsed request, a JSON-able answer (or a file), errors."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ApiRequest:
    method: str
    path: str  # below /console/api/, e.g. "devices/add"
    query: Mapping[str, str]
    body: Any  # the parsed JSON body of a write (None for GET)
    peer: str  # "console 192.168.1.20:51234", for the log
    host: str = ""  # the host name or address the console was asked on (its Host header, no port)


@dataclass(frozen=True)
class FileAnswer:
    """An answer that is not JSON (the CSV export)."""

    content_type: str
    body: bytes
    filename: str
    inline: bool = False  # shown or played in the page (the reply audio), not downloaded


@dataclass(frozen=True)
class JsonAnswer:
    """A JSON answer already encoded, off the event loop (a large one: the readings of a year)."""

    body: bytes


class ApiError(Exception):
    """A request the API refuses: HTTP status and a reason the page shows; nothing was changed."""

    def __init__(self, status: int, message: str, field: str | None = None, line: int | None = None,
                 problems: list[dict[str, Any]] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.field = field
        self.line = line  # the 1-based line of a text field the problem is on (the reply table)
        self.problems = problems or []  # every problem of a text field: [{"line", "message"}] (the action rules)


Handler = Callable[[ApiRequest], Awaitable[Any]]
Routes = Mapping[tuple[str, str], Handler]  # (method, path below /console/api/) -> handler


def text_field(body: Any, name: str, *, max_len: int = 200, required: bool = True) -> str:
    """A string field of a JSON object body, or ApiError 400 naming it."""
    if not isinstance(body, dict):
        raise ApiError(400, "the body must be a JSON object")
    value = body.get(name, None if required else "")
    if not isinstance(value, str) or (required and not value.strip()):
        raise ApiError(400, f"{name}: a non-empty string is needed", name)
    if len(value) > max_len:
        raise ApiError(400, f"{name}: at most {max_len} characters", name)
    return value.strip()
