"""Reply pipeline stages over an LLM token stream (pure, no I/O).

token stream -> `SentenceDivider` (sentences, or clauses) -> `extract_hints` ([happy], leading
emoji) -> `speech_text` (what TTS may say) -> `display_text` (what screens show); `shape` does the
last three and returns a `Sentence` (the brain contract's type: speech text + display text + hints).
"""

from __future__ import annotations

import re

from gateway.brain.contract import Hints, Sentence

__all__ = ["Hints", "Sentence", "display_text", "extract_hints", "shape", "speech_text"]

_TAG = re.compile(r"\[([A-Za-z_][A-Za-z0-9_ -]{0,30})\]")
_EMOJI = re.compile(
    "[\U0001f000-\U0001faff\U00002600-\U000027bf\U0001f900-\U0001f9ff\u2b50\u2b55\u203c\u2049\ufe0f\u200d]+"
)
_THINK = re.compile(r"<think>.*?</think>", re.S)
_TOOL_STATUS = re.compile(r"\[🔧[^\]]*\]")
_CODE_BLOCK = re.compile(r"```.*?(?:```|$)", re.S)
_INLINE_CODE = re.compile(r"`([^`]*)`")
_URL = re.compile(r"\b(?:https?://|www\.)\S+", re.I)
_MD_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_MD_MARKS = re.compile(r"(\*\*|__|\*|~~|^#{1,6}\s+|^>\s+|^\s*[-*+]\s+|^\s*\d+\.\s+)", re.M)


def extract_hints(sentence: str) -> tuple[str, Hints]:
    """Remove `[happy]`-style tags and a leading emoji; return the rest and what they hinted."""
    text = _TOOL_STATUS.sub("", sentence)
    emotions = tuple(t.strip().lower() for t in _TAG.findall(text))
    text = _TAG.sub("", text)
    emoji = ""
    if m := _EMOJI.match(text.lstrip()):
        emoji = m.group()
        text = text.lstrip()[m.end():]
    return " ".join(text.split()), Hints(emotions, emoji)


def speech_text(sentence: str) -> str:
    """What may be spoken: no think blocks, code, URLs, markdown, emoji or tool status tags."""
    text = _THINK.sub(" ", sentence)
    text = _TOOL_STATUS.sub(" ", text)
    text = _CODE_BLOCK.sub(" ", text)
    text = _INLINE_CODE.sub(r"\1", text)
    text = _MD_LINK.sub(r"\1", text)
    text = _URL.sub(" ", text)
    text = _MD_MARKS.sub("", text)
    text = _EMOJI.sub(" ", text)
    text = _TAG.sub(" ", text)
    text = " ".join(text.split())
    return text if any(c.isalnum() for c in text) else ""


def display_text(sentence: str) -> str:
    """What screens show: no think blocks, tool status or tags; emoji and URLs stay."""
    text = _THINK.sub(" ", sentence)
    text = _TOOL_STATUS.sub(" ", text)
    text = _TAG.sub(" ", text)
    return " ".join(text.split())


def shape(piece: str) -> Sentence:
    """One divided piece of the reply as a `Sentence`: speech text (empty: nothing to say), display
    text (tags removed; emoji and URLs kept) and the hints its tags and leading emoji gave."""
    text, hints = extract_hints(piece)
    return Sentence(speech_text(text), display_text(piece), hints)
