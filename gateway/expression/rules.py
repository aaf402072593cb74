"""Action rules: which standard action (Fay's `Action` semantics) a spoken sentence carries.

The table is `config/action_rules.csv` (UTF-8, editable in a spreadsheet), header
`code,behavior,affect,intensity,priority,sentimentHint,keywords`, keywords separated by `|`.
Matching: English keywords as whole words, case-insensitive (punctuation ignored, see
`gateway.brain.replies.normalize`); Chinese (CJK) keywords as substrings. Among the matching
rules the highest priority wins (ties: the earlier row); no match means no Action.

`ActionRules` re-reads the file when it changes, so edits take effect without a restart. A broken
row is logged with its line number and skipped; the other rows keep working. A file that cannot
be read at all keeps the last good table.
"""

from __future__ import annotations

import csv
import io
import logging
import math
from dataclasses import dataclass
from pathlib import Path

from gateway.expression.watched import WatchedFile
from gateway.brain.text import is_cjk, normalize

log = logging.getLogger(__name__)

HEADER = ("code", "behavior", "affect", "intensity", "priority", "sentimentHint", "keywords")


@dataclass(frozen=True)
class Action:
    """What to express, engine-neutral (Fay's `Action` object)."""

    code: str
    behavior: str = ""
    affect: str = ""
    intensity: float = 0.5  # 0..1
    priority: int = 50  # 0..255, higher wins

    def to_fay(self) -> dict[str, object]:
        return {"code": self.code, "behavior": self.behavior, "affect": self.affect,
                "intensity": self.intensity, "priority": self.priority}


@dataclass(frozen=True)
class ActionRule:
    action: Action
    sentiment_hint: float
    keywords: tuple[str, ...]  # normalized
    line: int

    def matches(self, words: str, compact: str) -> bool:
        for kw in self.keywords:
            if is_cjk(kw):
                if kw.replace(" ", "") in compact:
                    return True
            elif f" {kw} " in words:
                return True
        return False


@dataclass(frozen=True)
class RowProblem:
    line: int
    text: str


def parse_rules(text: str) -> tuple[list[ActionRule], list[RowProblem]]:
    """Rules and row problems of a CSV text (line numbers are 1-based file lines)."""
    rules: list[ActionRule] = []
    problems: list[RowProblem] = []
    reader = csv.reader(io.StringIO(text.lstrip("\ufeff")))
    header = next(reader, None)
    if header is None or tuple(h.strip() for h in header) != HEADER:
        return [], [RowProblem(1, f"header must be {','.join(HEADER)}")]
    for row in reader:
        line = reader.line_num
        if not row or all(not cell.strip() for cell in row) or row[0].lstrip().startswith("#"):
            continue
        try:
            rules.append(_parse_row(row, line))
        except ValueError as exc:
            problems.append(RowProblem(line, str(exc)))
    return rules, problems


def _parse_row(row: list[str], line: int) -> ActionRule:
    if len(row) != len(HEADER):
        raise ValueError(f"expected {len(HEADER)} columns, got {len(row)}")
    code, behavior, affect, intensity, priority, hint, keywords = (c.strip() for c in row)
    if not code:
        raise ValueError("code is empty")
    try:
        inten = float(intensity)
        prio = int(priority)
        hint_value = float(hint) if hint else 0.0
    except ValueError:
        raise ValueError(f"intensity/priority/sentimentHint must be numbers, got {intensity!r}, {priority!r}, {hint!r}") from None
    if not (0.0 <= inten <= 1.0) or math.isnan(inten):
        raise ValueError(f"intensity must be 0..1, got {inten}")
    if not 0 <= prio <= 255:
        raise ValueError(f"priority must be 0..255, got {prio}")
    kws = tuple(k for k in (normalize(k) for k in keywords.split("|")) if k)
    if not kws:
        raise ValueError("keywords is empty")
    return ActionRule(Action(code, behavior, affect, inten, prio), hint_value, kws, line)


def match_action(rules: list[ActionRule] | tuple[ActionRule, ...], text: str) -> Action | None:
    """The highest-priority action whose keywords occur in `text`, or None."""
    words = f" {normalize(text)} "
    compact = words.replace(" ", "")
    best: ActionRule | None = None
    for rule in rules:
        if (best is None or rule.action.priority > best.action.priority) and rule.matches(words, compact):
            best = rule
    return best.action if best else None


class ActionRules:
    """The rule table of one CSV file, re-read when the file changes (see `WatchedFile`)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.problems: tuple[RowProblem, ...] = ()
        self._file = WatchedFile(self.path, self._parse, ())

    def _parse(self, text: str) -> tuple[ActionRule, ...]:
        rules, problems = parse_rules(text)
        for p in problems:
            log.warning("action rules %s line %d: %s (row skipped)", self.path, p.line, p.text)
        self.problems = tuple(problems)
        log.info("action rules %s: %d rules loaded", self.path, len(rules))
        return tuple(rules)

    @property
    def rules(self) -> tuple[ActionRule, ...]:
        return self._file.get()

    def match(self, text: str) -> Action | None:
        return match_action(self.rules, text)

    def by_code(self, code: str) -> Action | None:
        """The action of the first row with this code (how hints name an action), or None."""
        return next((r.action for r in self.rules if r.action.code == code), None)
