"""The local brain: answers instantly and offline from the reply table (`config/replies.yaml`).

Built from the config, it re-reads the file when it changes (a stat per answer, like the
expression's rule files): an edit (by hand or from the console) is used from the next answer on;
a broken edit is logged and the last good table kept."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING

from gateway.brain.contract import Brain, BrainContext, BrainSession, Sentence, sentences_of
from gateway.brain.replies import ReplyTable, load_reply_table, parse_reply_text, render
from gateway.expression.watched import WatchedFile

if TYPE_CHECKING:
    from gateway.config import GatewayConfig


class LocalBrain(Brain):
    """Answers from the reply table: first matching intent wins, else the fallback sentence."""

    def __init__(self, table: ReplyTable, fallback: str, current: Callable[[], ReplyTable] | None = None) -> None:
        if not fallback.strip():
            raise ValueError("the fallback reply must not be empty")
        self._table = table
        self._current = current  # the table as the file is now (hot reload), else the fixed `table`
        self.fallback = fallback
        self._turns: dict[int, int] = {}  # intent index -> times answered (for pick: rotate)

    @classmethod
    def from_config(cls, cfg: GatewayConfig) -> LocalBrain:
        """Load `cfg.brain.replies` (relative to the config file), re-read when it changes. Raises
        ConfigError if broken at start."""
        path = cfg.path(cfg.brain.replies)
        table = load_reply_table(path)
        watched = WatchedFile(path, lambda text: parse_reply_text(text, str(path)), table)
        return cls(table, cfg.brain.fallback, watched.get)

    @property
    def table(self) -> ReplyTable:
        return self._current() if self._current is not None else self._table

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
        for sentence in sentences_of(self._brain.answer(utterance, ctx), "local"):
            yield sentence
