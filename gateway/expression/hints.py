"""What a reply sentence's hints mean for its expression: `[happy]` tags and a leading emoji.

An LLM reply may carry hints (`gateway.brain.contract.Hints`: the emotion tags and the leading emoji
the reply pipeline took out of the spoken text). `config/hints.yaml` maps each tag (lower case,
without brackets) or emoji to an `action` (a code of the action rules table: behavior, affect,
intensity and priority come from that row) and/or a `sentiment` (-2..2). For one sentence the
first hint (tags in order, then the emoji) with an action gives the Action, and the first hint
with a sentiment gives the Sentiment; both win over the keyword rules and the lexicon, which
still decide whatever no hint gave. Unknown tags are ignored (logged at debug level).

The file is re-read when it changes; a broken entry is logged and skipped, the others keep working.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gateway.errors import ConfigError
from gateway.expression.rules import Action
from gateway.expression.watched import WatchedFile, yaml_document
from gateway.brain.contract import Hints

log = logging.getLogger(__name__)

VARIATION_SELECTOR = "\ufe0f"


@dataclass(frozen=True)
class Meaning:
    """What one tag or emoji means: an action code and/or a sentiment."""

    action: str = ""
    sentiment: float | None = None


@dataclass(frozen=True)
class Hinted:
    """What a sentence's hints decided (None: left to the keyword rules / the lexicon)."""

    action: Action | None = None
    sentiment: float | None = None


@dataclass(frozen=True)
class HintTable:
    meanings: dict[str, Meaning] = field(default_factory=dict)  # tag (lower case) or emoji -> meaning

    def lookup(self, hints: Hints) -> list[tuple[str, Meaning]]:
        """The known hints of a sentence, in order (tags first, then the emoji); unknown ones are
        logged at debug level and skipped."""
        found: list[tuple[str, Meaning]] = []
        for tag in hints.emotions:
            if (meaning := self.meanings.get(tag.strip().lower())) is not None:
                found.append((tag, meaning))
            else:
                log.debug("hints: unknown tag [%s] ignored", tag)
        if hints.emoji:
            emoji = hints.emoji.replace(VARIATION_SELECTOR, "")
            for key in (emoji, *emoji):  # the whole sequence, else its first known character
                if (meaning := self.meanings.get(key)) is not None:
                    found.append((key, meaning))
                    break
            else:
                log.debug("hints: unknown emoji %s ignored", hints.emoji)
        return found


def parse_hints(data: Any, source: str = "<memory>") -> HintTable:
    """The table of a parsed YAML document; broken entries are logged and skipped."""
    if data is None:
        return HintTable()
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: must be a mapping of tag or emoji -> {{action, sentiment}}")
    meanings: dict[str, Meaning] = {}
    for key, value in data.items():
        try:
            meanings[_key(key)] = _meaning(value)
        except ValueError as exc:
            log.warning("%s: hint %r: %s (skipped)", source, key, exc)
    return HintTable(meanings)


def _key(key: Any) -> str:
    if not isinstance(key, str) or not key.strip():
        raise ValueError("a key must be a tag name or an emoji (quote words YAML reads otherwise, e.g. 'no')")
    return key.strip().lower().replace(VARIATION_SELECTOR, "")


def _meaning(value: Any) -> Meaning:
    if not isinstance(value, dict) or not value or not set(value) <= {"action", "sentiment"}:
        raise ValueError("must be a mapping with `action` (a code of the action rules) and/or `sentiment`")
    action = value.get("action", "")
    sentiment = value.get("sentiment")
    if not isinstance(action, str):
        raise ValueError(f"action must be an action code, got {action!r}")
    if sentiment is not None:
        if isinstance(sentiment, bool) or not isinstance(sentiment, (int, float)) or math.isnan(sentiment) \
                or not -2 <= sentiment <= 2:
            raise ValueError(f"sentiment must be a number in -2..2, got {sentiment!r}")
        sentiment = float(sentiment)
    return Meaning(action.strip(), sentiment)


class HintMap:
    """The hint table of one YAML file (re-read when it changes), resolved against the action rules."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._file = WatchedFile(self.path, lambda t: parse_hints(yaml_document(t), str(self.path)), HintTable())
        self._missing: set[str] = set()  # action codes already reported as absent from the rules

    def action_codes(self) -> set[str]:
        """The action codes the hints name (the file as it is now)."""
        return {m.action for m in self._file.get().meanings.values() if m.action}

    def resolve(self, hints: Hints, action_by_code: Callable[[str], Action | None]) -> Hinted:
        if not hints:
            return Hinted()
        action: Action | None = None
        sentiment: float | None = None
        for key, meaning in self._file.get().lookup(hints):
            if action is None and meaning.action:
                action = action_by_code(meaning.action)
                if action is None and meaning.action not in self._missing:
                    self._missing.add(meaning.action)
                    log.warning("%s: hint %r names action %r, which the action rules do not have",
                                self.path, key, meaning.action)
            if sentiment is None and meaning.sentiment is not None:
                sentiment = meaning.sentiment
        return Hinted(action, sentiment)
