"""Conversation history of one device, within a token budget (oldest turns dropped first)."""

from __future__ import annotations


def estimate_tokens(text: str) -> int:
    """About 4 characters per token for Latin text, 1 per CJK character (no tokenizer needed)."""
    cjk = sum(1 for c in text if "\u3000" <= c <= "\u9fff" or "\uf900" <= c <= "\ufaff")
    return cjk + (len(text) - cjk + 3) // 4 + 1


class History:
    def __init__(self, budget_tokens: int) -> None:
        self.budget = budget_tokens
        self._turns: list[tuple[str, str]] = []  # (user, assistant)

    def add_turn(self, user: str, reply: str) -> None:
        self._turns.append((user, reply))
        self._trim()

    def replace_last_reply(self, reply: str) -> None:
        if self._turns:
            self._turns[-1] = (self._turns[-1][0], reply)
            self._trim()

    def messages(self) -> list[dict[str, str]]:
        """The newest turns that fit in the budget, oldest first."""
        kept: list[tuple[str, str]] = []
        used = 0
        for user, reply in reversed(self._turns):
            used += estimate_tokens(user) + estimate_tokens(reply)
            if used > self.budget:
                break
            kept.append((user, reply))
        out: list[dict[str, str]] = []
        for user, reply in reversed(kept):
            out.append({"role": "user", "content": user})
            if reply:
                out.append({"role": "assistant", "content": reply})
        return out

    def tokens(self) -> int:
        return sum(estimate_tokens(u) + estimate_tokens(r) for u, r in self._turns)

    def _trim(self) -> None:
        while len(self._turns) > 1 and self.tokens() > self.budget:  # the turn in progress stays
            del self._turns[0]
