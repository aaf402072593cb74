"""Action codes and sentiment -> the xiaozhi firmware's emotion names (config/xiaozhi_emotions.yaml).

The firmware shows a face per emotion name (`llm {emotion}`); names it does not know fall back to
its default face, so only the names below are accepted. Loaded once; a bad row is logged with its
line number and skipped, a missing or unreadable file gives the built-in neutral table.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

import yaml

log = logging.getLogger(__name__)

# The firmware's emotion names and the emoji its reference server sends with each (`llm.text`).
EMOJI = MappingProxyType({
    "neutral": "😶", "happy": "🙂", "laughing": "😆", "funny": "😂", "sad": "😔", "angry": "😠",
    "crying": "😭", "loving": "😍", "embarrassed": "😳", "surprised": "😲", "shocked": "😱",
    "thinking": "🤔", "winking": "😉", "cool": "😎", "relaxed": "😌", "delicious": "🤤",
    "kissy": "😘", "confident": "😏", "sleepy": "😴", "silly": "😜", "confused": "🙄",
})


@dataclass(frozen=True)
class EmotionTable:
    actions: dict[str, str] = field(default_factory=dict)  # action code -> emotion
    sentiment: tuple[tuple[float, str], ...] = ()  # (threshold, emotion), highest threshold first

    def pick(self, action: str | None, sentiment: float | None) -> str | None:
        """The emotion of a sentence, or None when neither its action nor its sentiment maps."""
        if action is not None and action in self.actions:
            return self.actions[action]
        if sentiment is not None:
            for threshold, emotion in self.sentiment:
                if sentiment >= threshold:
                    return emotion
        return None

    @classmethod
    def load(cls, path: Path) -> "EmotionTable":
        try:
            root = yaml.compose(path.read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError) as exc:
            log.error("%s: cannot read the xiaozhi emotion table (%s); boxes get no emotions", path, exc)
            return cls()
        if root is None:
            return cls()
        if not isinstance(root, yaml.MappingNode):
            log.error("%s:%d: expected a mapping with actions: and sentiment:", path, root.start_mark.line + 1)
            return cls()
        actions: dict[str, str] = {}
        sentiment: list[tuple[float, str]] = []
        for key, value in root.value:
            if key.value == "actions":
                actions.update(_rows(path, value, lambda k: k))
            elif key.value == "sentiment":
                sentiment.extend(_rows(path, value, _threshold))
            else:
                log.warning("%s:%d: unknown section %r (expected actions or sentiment)", path, key.start_mark.line + 1, key.value)
        return cls(actions, tuple(sorted(sentiment, reverse=True)))


def _threshold(text: str) -> float:
    value = float(text)
    if not -2 <= value <= 2:
        raise ValueError(f"sentiment threshold {value} is outside -2..2")
    return value


def _rows(path: Path, node: yaml.Node, convert):
    if not isinstance(node, yaml.MappingNode):
        log.warning("%s:%d: expected a mapping of key: emotion", path, node.start_mark.line + 1)
        return
    for key, value in node.value:
        line = key.start_mark.line + 1
        if not isinstance(value, yaml.ScalarNode) or value.value not in EMOJI:
            shown = value.value if isinstance(value, yaml.ScalarNode) else "a list or mapping"
            log.warning("%s:%d: %r is not a firmware emotion (one of %s); row skipped", path, line, shown, ", ".join(EMOJI))
            continue
        try:
            yield convert(key.value), value.value
        except ValueError as exc:
            log.warning("%s:%d: %s; row skipped", path, line, exc)
