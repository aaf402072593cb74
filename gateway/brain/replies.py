"""The reply table: intents loaded from `config/replies.yaml`, matching, and answer templates.

File format (see docs/CONFIG.md)::

    intents:
      - name: time
        keywords: ["what time is it", "现在几点"]   # whole words/phrases; Chinese: substrings
        regex: '\\bwhat(?:s| is) the time\\b'        # optional, Python syntax, case-insensitive
        answers: ["It is {time}."]
        pick: first                                # or: rotate

Intents are tried in file order; the first that matches wins. Everything here is pure and
immutable: the only state (the rotation counters) lives in the brain that uses the table.
"""

from __future__ import annotations

import re
import string
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

import yaml

from gateway.brain.text import is_cjk, normalize
from gateway.errors import ConfigError

Pick = Literal["first", "rotate"]
PICKS: tuple[Pick, ...] = ("first", "rotate")
INTENT_KEYS = frozenset({"name", "keywords", "regex", "answers", "pick"})

_WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August",
           "September", "October", "November", "December")  # fmt: skip
_WEEKDAYS_ZH = ("星期一", "星期二", "星期三", "星期四", "星期五", "星期六", "星期日")
# Placeholders every answer may use; each maps a timezone-aware datetime to spoken text.
TIME_PLACEHOLDERS = frozenset({"time", "date", "weekday", "time_zh", "date_zh", "weekday_zh"})


def _time_zh(now: datetime) -> str:
    h = now.hour
    period = "凌晨" if h < 6 else "上午" if h < 12 else "中午" if h < 13 else "下午" if h < 18 else "晚上"
    minutes = "整" if now.minute == 0 else f"{now.minute:02d}分"
    return f"{period}{h % 12 or 12}点{minutes}"


def time_placeholders(now: datetime) -> dict[str, str]:
    """Spoken forms of `now`, e.g. time "3:05 PM", date "Monday, November 30" (locale-independent)."""
    return {
        "time": f"{now.hour % 12 or 12}:{now.minute:02d} {'AM' if now.hour < 12 else 'PM'}",
        "date": f"{_WEEKDAYS[now.weekday()]}, {_MONTHS[now.month - 1]} {now.day}",
        "weekday": _WEEKDAYS[now.weekday()],
        "time_zh": _time_zh(now),
        "date_zh": f"{now.month}月{now.day}日，{_WEEKDAYS_ZH[now.weekday()]}",
        "weekday_zh": _WEEKDAYS_ZH[now.weekday()],
    }


def _spoken_group(value: str | None) -> str:
    """A regex group value as it goes into an answer: trimmed; ALL CAPS or all lower -> Title Case."""
    value = (value or "").strip(" \t\n.,!?;:'\"。，！？")
    return value.title() if value.isupper() or value.islower() else value


@dataclass(frozen=True)
class Intent:
    name: str
    answers: tuple[str, ...]
    keywords: tuple[str, ...] = ()  # normalized (see `normalize`)
    regex: re.Pattern[str] | None = None
    pick: Pick = "first"

    def match(self, utterance: str) -> dict[str, str] | None:
        """The placeholder values from the match ({} for a keyword hit), or None for no match."""
        if self.regex is not None and (m := self.regex.search(utterance)):
            return {k: _spoken_group(v) for k, v in m.groupdict().items()}
        if self.keywords:
            words = f" {normalize(utterance)} "
            compact = words.replace(" ", "")
            for kw in self.keywords:
                if (kw.replace(" ", "") in compact) if is_cjk(kw) else (f" {kw} " in words):
                    return {}
        return None


@dataclass(frozen=True)
class IntentMatch:
    index: int  # position in the table (0-based)
    intent: Intent
    groups: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ReplyTable:
    intents: tuple[Intent, ...]
    source: str = "<memory>"

    def match(self, utterance: str) -> IntentMatch | None:
        """The first intent (in table order) that matches `utterance`, or None."""
        for i, intent in enumerate(self.intents):
            groups = intent.match(utterance)
            if groups is not None:
                return IntentMatch(i, intent, groups)
        return None


def render(template: str, now: datetime, groups: Mapping[str, str] | None = None) -> str:
    """Fill `{time}`, `{date}`, ... and regex groups into an answer template."""
    return template.format_map({**time_placeholders(now), **(groups or {})})


# ---- loading and validation -------------------------------------------------------------------

_Fail = Callable[[str], ConfigError]  # builds an error that already names the file and intent


def load_reply_table(path: Path) -> ReplyTable:
    """Read and validate a replies YAML file. Raises ConfigError naming the file, intent and problem."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"replies error: cannot read {path}: {exc.strerror}") from None
    return parse_reply_text(text, str(path))


def parse_reply_text(text: str, source: str = "<memory>") -> ReplyTable:
    """Validate the text of a replies file. Raises ConfigError naming the source, intent and problem."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"replies error: {source} is not valid YAML: {exc}") from None
    return parse_reply_table(data, source)


def parse_reply_table(data: Any, source: str = "<memory>") -> ReplyTable:
    """Validate the parsed YAML of a replies file (a mapping with an `intents:` list)."""
    if not isinstance(data, dict) or set(data) != {"intents"}:
        found = sorted(map(str, data)) if isinstance(data, dict) else type(data).__name__
        raise ConfigError(f"replies error in {source}: expected a mapping with one key, intents: (found {found})")
    items = data["intents"]
    if not isinstance(items, list) or not items:
        raise ConfigError(f"replies error in {source}: intents must be a non-empty list of intents")
    intents = tuple(_parse_intent(item, i, source) for i, item in enumerate(items))
    seen: dict[str, int] = {}
    for i, intent in enumerate(intents):
        if intent.name in seen:
            where = f"replies error in {source}: intents[{i}] ({intent.name})"
            raise ConfigError(f"{where}: name already used by intents[{seen[intent.name]}]")
        seen[intent.name] = i
    return ReplyTable(intents, source)


def _parse_intent(item: Any, index: int, source: str) -> Intent:
    name = item.get("name") if isinstance(item, dict) else None
    where = f"replies error in {source}: intents[{index}]" + (f" ({name})" if isinstance(name, str) else "")

    def fail(problem: str) -> ConfigError:
        return ConfigError(f"{where}: {problem}")

    if not isinstance(item, dict):
        raise fail(f"must be a mapping with name, keywords/regex and answers (found {item!r})")
    if unknown := sorted(map(str, set(item) - INTENT_KEYS)):
        raise fail(f"unknown key {', '.join(unknown)} (allowed: {', '.join(sorted(INTENT_KEYS))})")
    if not isinstance(name, str) or not name.strip():
        raise fail("name is missing or empty (give every intent a short name, e.g. name: greeting)")

    keywords = item.get("keywords") or []
    if not isinstance(keywords, list) or not all(isinstance(k, str) for k in keywords):
        raise fail(f"keywords must be a list of strings (found {keywords!r})")
    normalized = tuple(normalize(k) for k in keywords)
    if bad := [k for k, n in zip(keywords, normalized, strict=True) if not n]:
        raise fail(f"keyword {bad[0]!r} is empty once punctuation is ignored")

    regex = _compile(item.get("regex"), fail)
    if not normalized and regex is None:
        raise fail("needs keywords or a regex (or both), otherwise it can never match")

    answers = item.get("answers")
    if not isinstance(answers, list) or not answers:
        raise fail("answers is missing or empty (give a list of one or more reply sentences)")
    groups = set(regex.groupindex) if regex is not None else set()
    for answer in answers:
        _check_answer(answer, groups, keyword_hits=bool(normalized), fail=fail)

    pick = item.get("pick", "first")
    if pick not in PICKS:
        raise fail(f"pick = {pick!r} is not allowed (use one of: {', '.join(PICKS)})")
    return Intent(name.strip(), tuple(answers), normalized, regex, pick)


def _compile(pattern: Any, fail: _Fail) -> re.Pattern[str] | None:
    if pattern is None:
        return None
    if not isinstance(pattern, str) or not pattern:
        raise fail(f"regex must be a non-empty string (found {pattern!r})")
    try:
        regex = re.compile(pattern, re.IGNORECASE)
    except re.error as exc:
        raise fail(f"regex {pattern!r} is not a valid Python regex: {exc}") from None
    if shadowed := sorted(set(regex.groupindex) & TIME_PLACEHOLDERS):
        raise fail(f"regex group name {shadowed[0]!r} clashes with the built-in placeholder {{{shadowed[0]}}}")
    return regex


def _check_answer(answer: Any, groups: set[str], *, keyword_hits: bool, fail: _Fail) -> None:
    if not isinstance(answer, str) or not answer.strip():
        raise fail(f"every answer must be a non-empty string (found {answer!r})")
    try:
        fields = [f for _, f, _, _ in string.Formatter().parse(answer) if f is not None]
    except ValueError as exc:
        raise fail(f"answer {answer!r} has unbalanced braces ({exc}); write {{{{ and }}}} for literal braces") from None
    for name in fields:
        if name in TIME_PLACEHOLDERS:
            continue
        if name not in groups:
            allowed = ", ".join(f"{{{n}}}" for n in sorted(TIME_PLACEHOLDERS | groups))
            raise fail(f"answer {answer!r} uses unknown placeholder {{{name}}} (allowed: {allowed})")
        if keyword_hits:
            raise fail(
                f"answer {answer!r} uses regex group {{{name}}}, but a keyword match cannot fill it "
                f"(move the keywords to a separate intent)"
            )
