"""The local brain: answers instantly and offline from the reply table (`config/replies.yaml`)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from gateway.brain.contract import Brain, BrainContext, BrainSession, Sentence, sentences_of
from gateway.brain.replies import ReplyTable, load_reply_table, render

if TYPE_CHECKING:
    from gateway.config import GatewayConfig


class LocalBrain(Brain):
    """Answers from the reply table: first matching intent wins, else the fallback sentence."""

    def __init__(self, table: ReplyTable, fallback: str) -> None:
        if not fallback.strip():
            raise ValueError("the fallback reply must not be empty")
        self.table = table
        self.fallback = fallback
        self._turns: dict[int, int] = {}  # intent index -> times answered (for pick: rotate)

    @classmethod
    def from_config(cls, cfg: GatewayConfig) -> LocalBrain:
        """Load `cfg.brain.replies` (relative to the config file). Raises ConfigError if broken."""
        return cls(load_reply_table(cfg.path(cfg.brain.replies)), cfg.brain.fallback)

    def try_answer(self, utterance: str, ctx: BrainContext) -> str | None:
        """The whole reply text when an intent matches, else None (the seam for an LLM fallback)."""
        found = self.table.match(utterance.strip())
        if found is None:
            return None
        answers = found.intent.answers
        turn = self._turns.get(found.index, 0)
        self._turns[found.index] = turn + 1
        template = answers[turn % len(answers)] if found.intent.pick == "rotate" else answers[0]
        return render(template, ctx.now, found.groups)

    def answer(self, utterance: str, ctx: BrainContext) -> str:
        """The whole reply text: the first matching intent's answer, or the fallback."""
        return self.try_answer(utterance, ctx) or self.fallback

    def session(self, device_id: str) -> BrainSession:
        return LocalSession(self)


class LocalSession(BrainSession):
    """A connection's session of the local brain: nothing to remember, nothing to take back."""

    # Instant, but asking it on the speculative transcript lets the voice pipeline synthesize the
    # reply's first piece during the endpoint wait; a withdrawn reply only moved a `rotate` on.
    speculates = True

    def __init__(self, brain: LocalBrain) -> None:
        self._brain = brain

    async def reply(self, utterance: str, ctx: BrainContext) -> AsyncIterator[Sentence]:
        """The answer, one sentence at a time (see `BrainSession.reply`)."""
        for sentence in sentences_of(self._brain.answer(utterance, ctx)):
            yield sentence
