"""Sentiment of a sentence, as Fay computes it locally: a number in [-2, 2].

Four keyword lists weigh +2, +1, -1, -2 (`config/sentiment.yaml`, Chinese and English). The score
is the weighted sum of the matched keywords, +0.3 when the text contains "?", "？", "!", "！" or
"~", -0.3 when it contains "...", "…" or "。。", clamped to [-2, 2]. English keywords match whole
words, case-insensitive; Chinese keywords match as substrings, longest first, and a matched
span is not counted again (so "不好" counts -1 once, not also +1 for "好").
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gateway.errors import ConfigError
from gateway.expression.watched import WatchedFile, yaml_document
from gateway.brain.text import is_cjk, normalize

LISTS: dict[str, float] = {"very_positive": 2.0, "positive": 1.0, "negative": -1.0, "very_negative": -2.0}
LIFT = ("?", "？", "!", "！", "~")
DROP = ("...", "…", "。。")
PUNCTUATION_STEP = 0.3


@dataclass(frozen=True)
class SentimentLexicon:
    english: tuple[tuple[str, float], ...] = ()  # normalized phrase, weight
    chinese: tuple[tuple[str, float], ...] = ()  # longest first

    def score(self, text: str) -> float:
        total = 0.0
        words = f" {normalize(text)} "
        for kw, weight in self.english:
            total += weight * words.count(f" {kw} ")
        rest = text
        for kw, weight in self.chinese:
            hits = rest.count(kw)
            if hits:
                total += weight * hits
                rest = rest.replace(kw, " ")
        if any(p in text for p in LIFT):
            total += PUNCTUATION_STEP
        if any(p in text for p in DROP):
            total -= PUNCTUATION_STEP
        return round(max(-2.0, min(2.0, total)), 2)


def parse_lexicon(data: Any, source: str = "<memory>") -> SentimentLexicon:
    if not isinstance(data, dict) or not set(data) <= set(LISTS):
        raise ConfigError(f"{source}: must be a mapping with the keys {', '.join(LISTS)}")
    english: list[tuple[str, float]] = []
    chinese: list[tuple[str, float]] = []
    for name, weight in LISTS.items():
        words = data.get(name) or []
        if not isinstance(words, list) or not all(isinstance(w, str) for w in words):
            raise ConfigError(f"{source}: {name} must be a list of strings")
        for w in words:
            if is_cjk(w):
                chinese.append((w.strip(), weight))
            elif normalize(w):
                english.append((normalize(w), weight))
    chinese.sort(key=lambda kw: -len(kw[0]))
    return SentimentLexicon(tuple(english), tuple(chinese))


class Sentiment:
    """The lexicon of one YAML file, re-read when the file changes."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._file = WatchedFile(self.path, lambda t: parse_lexicon(yaml_document(t), str(self.path)),
                                 SentimentLexicon())

    def score(self, text: str) -> float:
        return self._file.get().score(text)
