"""What a caller asks the memory to store, checked before anything is embedded or written.

`node_input` validates one node (user, content, type, kind, tags, importance, time) and returns
a `NodeSpec`; `MemoryService.remember_many` embeds a list of them in one call and writes them in
one transaction. `embed_text` is the text whose embedding the node gets: its content unless the
writer says otherwise (sensor readings, see gateway/memory/readings.py).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from gateway.memory.errors import MemoryInputError
from gateway.memory.importance import heuristic_importance
from gateway.memory.tags import KINDS, NODE_TYPES, build_tags

_USER = re.compile(r"^[A-Za-z0-9_.@-]{1,64}$")
MAX_CONTENT = 4000


@dataclass(frozen=True)
class NodeSpec:
    """A checked node before it is embedded (the fields of `NodeDraft` but the embedding)."""

    user_id: str
    type: str
    content: str
    importance: int
    ts: float
    tags: tuple[str, ...]
    pointer_ids: tuple[int, ...] = ()
    embed_text: str = ""  # "": the content

    @property
    def text_to_embed(self) -> str:
        return self.embed_text or self.content


def check_user(user_id: str) -> str:
    if not isinstance(user_id, str) or not _USER.match(user_id):
        raise MemoryInputError(f"bad user id {user_id!r}: 1-64 characters of letters, digits and _ . @ -")
    return user_id


def node_input(user_id: str, content: str, *, now: float, kind: str | None = None, source: str | None = None,
               persistent: bool = False, extra_tags: Iterable[str] = (), node_type: str = "observation",
               importance: int | None = None, when: datetime | float | None = None,
               pointer_ids: Iterable[int] = (), embed_text: str = "") -> NodeSpec:
    """One node checked: MemoryInputError with a clear message for anything a caller got wrong."""
    check_user(user_id)
    content = (content or "").strip()
    if not content:
        raise MemoryInputError("content must not be empty")
    if len(content) > MAX_CONTENT:
        raise MemoryInputError(f"content is {len(content)} characters; the limit is {MAX_CONTENT}")
    if node_type not in NODE_TYPES:
        raise MemoryInputError(f"node type must be one of {', '.join(NODE_TYPES)}, got {node_type!r}")
    if kind is not None and kind not in KINDS:
        raise MemoryInputError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
    if importance is not None and not (isinstance(importance, int) and 0 <= importance <= 10):
        raise MemoryInputError(f"importance must be an integer 0-10, got {importance!r}")
    if isinstance(extra_tags, str):
        raise MemoryInputError("extra_tags must be a list of namespace:value strings, not one string")
    tags = build_tags(kind, source, persistent, extra_tags)
    ts = when.timestamp() if isinstance(when, datetime) else (when if when is not None else now)
    score = importance if importance is not None else heuristic_importance(content, kind)
    return NodeSpec(user_id, node_type, content, score, float(ts), tuple(tags), tuple(pointer_ids), embed_text)
