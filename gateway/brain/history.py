"""Conversation history of one user (or one unmapped device), within a token budget.

A `Turn` is the unit: the user's words, the tool exchanges made for them (assistant tool calls and
tool results, in order) and the reply that was actually played. When the budget is exceeded the
oldest turns are dropped whole, so a tool call never loses its result or its question.

Kept in RAM per gateway; with `storage.backend: postgres` the brain also keeps every turn in the
shared store (gateway/brain/history_store.py) and reads it back at each turn (`adopt`), so a
person's conversation continues on whichever gateway serves the next utterance.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any


def estimate_tokens(text: str) -> int:
    """About 4 characters per token for Latin text, 1 per CJK character (no tokenizer needed)."""
    cjk = sum(1 for c in text if "\u3000" <= c <= "\u9fff" or "\uf900" <= c <= "\ufaff")
    return cjk + (len(text) - cjk + 3) // 4 + 1


@dataclass(eq=False)
class Turn:
    user: str
    reply: str = ""
    tools: list[dict[str, Any]] = field(default_factory=list)  # OpenAI chat messages, in order
    id: str = field(default_factory=lambda: uuid.uuid4().hex)  # its row in a shared store

    def messages(self) -> list[dict[str, Any]]:
        reply = [{"role": "assistant", "content": self.reply}] if self.reply else []
        return [{"role": "user", "content": self.user}, *self.tools, *reply]

    def tokens(self) -> int:
        tools = sum(estimate_tokens(json.dumps(m, ensure_ascii=False)) for m in self.tools)
        return estimate_tokens(self.user) + estimate_tokens(self.reply) + tools


def kept(turns: Sequence[Turn], budget_tokens: int) -> list[Turn]:
    """The turns a history keeps (oldest first): the oldest dropped whole while the rest exceed
    the budget; the newest always stays. The RAM history and the shared store trim alike."""
    kept_turns, total = list(turns), sum(t.tokens() for t in turns)
    while len(kept_turns) > 1 and total > budget_tokens:
        total -= kept_turns.pop(0).tokens()
    return kept_turns


class History:
    def __init__(self, budget_tokens: int) -> None:
        self.budget = budget_tokens
        self._turns: list[Turn] = []

    def start(self, user: str) -> Turn:
        """A new turn (the newest); change it with `set_reply` / `add_tools`."""
        turn = Turn(user)
        self._turns.append(turn)
        self._trim()
        return turn

    def set_reply(self, turn: Turn, reply: str) -> None:
        turn.reply = reply
        self._trim()

    def drop(self, turn: Turn) -> None:
        """Forget `turn` (a reply withdrawn before any of it was played)."""
        if turn in self._turns:  # identity: turns compare by object
            self._turns.remove(turn)

    def add_tools(self, turn: Turn, messages: list[dict[str, Any]]) -> None:
        turn.tools.extend(messages)
        self._trim()

    def messages(self) -> list[dict[str, Any]]:
        """The newest whole turns that fit in the budget, oldest first."""
        kept: list[Turn] = []
        used = 0
        for turn in reversed(self._turns):
            used += turn.tokens()
            if used > self.budget:
                break
            kept.append(turn)
        return [m for turn in reversed(kept) for m in turn.messages()]

    def tokens(self) -> int:
        return sum(t.tokens() for t in self._turns)

    def adopt(self, stored: Sequence[Turn]) -> None:
        """Become the shared store's turns (oldest first): they include the other gateways' turns
        of this person. A turn this history holds already (same id) stays the same object, since a
        session may still complete it; the store has it as this gateway last saved it."""
        own = {t.id: t for t in self._turns}
        self._turns = [own.get(t.id, t) for t in stored]
        self._trim()

    def _trim(self) -> None:
        self._turns = kept(self._turns, self.budget)
