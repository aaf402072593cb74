"""The brain: decides what to say back to a transcribed utterance.

`Brain` is the seam the voice pipeline talks to. `LocalBrain` answers instantly from the reply
table (`config/replies.yaml`); an LLM- or memory-backed brain can implement the same protocol
later and use `LocalBrain.try_answer` first, falling back to the model only when no intent
matches.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Protocol, runtime_checkable


if TYPE_CHECKING:
    from gateway.config import GatewayConfig


@dataclass(frozen=True)
class BrainContext:
    """What the brain may know about the turn."""

    device_id: str
    now: datetime  # timezone-aware, injected (tests pass a fixed time)
    # The caller plays the reply and then tells the brain what was played (`brain.spoken(device_id,
    # text)`, when the reply ended or was interrupted): a brain that remembers keeps only that.
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


class Sentence(str):
    """A reply sentence: the str itself is what TTS says (and history keeps); `display` is what
    screens and ReplyText show (emoji and URLs kept); `hints` drive the expression packets.

    A brain may yield a plain str instead: then display = speech and there are no hints.
    """

    display: str
    hints: Hints

    def __new__(cls, speech: str, display: str = "", hints: Hints = NO_HINTS) -> Sentence:
        self = super().__new__(cls, speech)
        self.display = display or speech
        self.hints = hints
        return self

    def __repr__(self) -> str:
        return f"Sentence({str(self)!r}, display={self.display!r}, hints={self.hints!r})"


def display_of(sentence: str) -> str:
    """What screens show for a sentence a brain yielded."""
    return sentence.display if isinstance(sentence, Sentence) else sentence


def hints_of(sentence: str) -> Hints:
    return sentence.hints if isinstance(sentence, Sentence) else NO_HINTS


@runtime_checkable
class Brain(Protocol):
    def reply(self, utterance: str, ctx: BrainContext) -> AsyncIterator[str]:
        """Yield the reply sentence by sentence, in order (as soon as each one is ready).

        Implement it as an async generator (`async def reply(...): ... yield sentence`);
        callers use `async for sentence in brain.reply(utterance, ctx)`. A sentence may be a
        `Sentence` (a str carrying display text and hints) or a plain str.
        """
        ...
