"""The brain contract: what the voice pipeline, the expression and the screens rely on.

`Brain` is the one shared brain of the gateway; every device connection gets its own
`BrainSession` from it (`brain.session(device_id)`) and asks it for replies: `reply(utterance,
ctx)` yields `Sentence`s (speech for TTS, display text for screens, `Hints` for the expression
packets). After a reply ended or was interrupted, the caller reports what was played
(`session.spoken`); a reply asked before the endpoint (`session.speculates`) is taken back with
`session.withdraw` when the user goes on speaking. The turn state (the last turn, the one waiting
for `spoken`, a withdrawal) lives in the session; what belongs to a user (the LLM history shared
by the user's devices, the memory) stays in the shared brain.

Implementations: `LocalBrain` (the reply table, gateway/brain/local.py), `MemoryBrain` (the same
with a memory, memory.py) and `CloudBrain` (LLM providers with the local answer first or as the
fallback, cloud.py); `factory.build_brain` picks one from the config.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime

from gateway.brain.text import split_sentences


@dataclass(frozen=True)
class BrainContext:
    """What the brain may know about the turn."""

    device_id: str
    now: datetime  # timezone-aware, injected (tests pass a fixed time)
    # The caller plays the reply and then tells the session what was played (`session.spoken(text)`,
    # when the reply ended or was interrupted): a brain that remembers keeps only that.
    reports_playback: bool = False

    def __post_init__(self) -> None:
        if self.now.tzinfo is None or self.now.utcoffset() is None:
            raise ValueError("BrainContext.now must be timezone-aware (e.g. datetime.now().astimezone())")


@dataclass(frozen=True)
class Hints:
    """Action/emotion hints of a reply sentence (`[happy]` tags, a leading emoji): they feed the
    Action/Sentiment packets (see `gateway.expression.hints`)."""

    emotions: tuple[str, ...] = ()  # lower case, in order of appearance
    emoji: str = ""

    def __bool__(self) -> bool:
        return bool(self.emotions or self.emoji)


NO_HINTS = Hints()


@dataclass(frozen=True)
class Sentence:
    """A reply sentence: `speech` is what TTS says (and the history and memory keep), `display` what
    screens and ReplyText show (emoji and URLs kept; defaults to the speech), `hints` drive the
    expression packets. `speech` may be empty: nothing in the piece can be spoken. `source` names
    the brain that made it: "local" (the reply table or the fallback), "memory" (an answer from the
    memory: a name, a reading, a remembered fact) or "llm" (an LLM provider); "" when unknown. The
    turn's metrics (`TurnMetrics.brain`) take the first sentence's."""

    speech: str
    display: str = ""
    hints: Hints = NO_HINTS
    source: str = ""

    def __post_init__(self) -> None:
        if not self.display:
            object.__setattr__(self, "display", self.speech)


def sentences_of(text: str, source: str = "") -> list[Sentence]:
    """A whole plain text (a reply-table answer, an announcement) as its sentences, without hints."""
    return [Sentence(s, source=source) for s in split_sentences(text)]


class BrainSession(ABC):
    """One device connection's conversation with the brain (`Brain.session`), holding its turn state.

    The defaults suit a brain that remembers nothing of what was played and cannot take a turn back.
    """

    speculates: bool = False
    """Whether a reply may be asked before the endpoint, on a speculative transcript (it can then be
    taken back with `withdraw`). True for the LLM brain, whose first sentence is slow."""

    @abstractmethod
    def reply(self, utterance: str, ctx: BrainContext) -> AsyncIterator[Sentence]:
        """Yield the reply sentence by sentence, in order (as soon as each one is ready).

        Implement it as an async generator (`async def reply(...): ... yield sentence`); callers use
        `async for sentence in session.reply(utterance, ctx)` and close it when they abandon it.
        """

    def spoken(self, text: str) -> None:
        """What was actually played of the last reply (its sentences' speech, joined), after it ended or
        was interrupted (`ctx.reports_playback`): a brain that remembers keeps only that."""

    def withdraw(self) -> None:
        """The reply being generated was abandoned before any of it was played (the user went on
        speaking): forget the turn as if it was never asked. Called before its generator is closed."""


class Brain(ABC):
    """The shared brain of the gateway: what is per user (the LLM history, the memory) lives here;
    each device connection talks to it through its own `session`."""

    @abstractmethod
    def session(self, device_id: str) -> BrainSession:
        """A new session for one connection of `device_id` (the device session asks once)."""

    async def drain(self) -> None:
        """Wait for the brain's background work in flight (the memory's turn writes): tests, shutdown."""

    async def close(self) -> None:
        """Release what the brain holds open (the LLM providers' connections)."""
