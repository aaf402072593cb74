"""Text helpers every brain and the expression rules share: one sentence splitter (batch and
streaming), one `normalize` for keyword matching, one CJK test."""

from __future__ import annotations

import re
import unicodedata

# Sentence ends: . ! ? (plus closing quotes/brackets) followed by whitespace, so "3.5", "3:05" and
# "e.g.x" never split; Chinese 。！？ anywhere; every line break.
_SENTENCE_END = re.compile(r"""[.!?]+["'”’)\]]*(?=\s)|[。！？]+["'”’」』）]*|\n""")
_CLAUSE_END = re.compile(r"""[.!?,;:]+["'”’)\]]*(?=\s)|[。！？，；：、]+["'”’」』）]*|\n""")
_THINK_OPEN = "<think>"
_ABBREVIATIONS = frozenset({"mr", "mrs", "ms", "dr", "prof", "st", "jr", "sr", "vs", "e.g", "i.e"})


class SentenceDivider:
    """Feed tokens, get complete sentences (or clauses) as soon as their end arrives.

    A `<think>...</think>` block is held back until it closes, so it is never cut in half.
    """

    def __init__(self, clauses: bool = False, min_clause_chars: int = 6) -> None:
        self._end = _CLAUSE_END if clauses else _SENTENCE_END
        self._min = min_clause_chars if clauses else 1
        self._buf = ""

    def feed(self, token: str) -> list[str]:
        self._buf += token
        out: list[str] = []
        while True:
            cut = self._next_cut()
            if cut is None:
                return out
            piece, self._buf = self._buf[:cut].strip(), self._buf[cut:]
            if piece:
                out.append(piece)

    def flush(self) -> list[str]:
        rest, self._buf = self._buf.strip(), ""
        return [rest] if rest else []

    def _next_cut(self) -> int | None:
        start = self._buf.find(_THINK_OPEN)
        if start != -1:
            close = self._buf.find("</think>", start)
            if close == -1:
                return None  # wait for the block to close
            if start == 0 or not self._buf[:start].strip():
                return close + len("</think>")
        for m in self._end.finditer(self._buf):
            if start != -1 and m.start() > start:
                break
            if len(self._buf[: m.end()].strip()) >= self._min and not _abbreviation(self._buf[: m.start()]):
                return m.end()
        return None


def _abbreviation(text: str) -> bool:
    words = text.split()
    return bool(words) and words[-1].casefold().rstrip(".") in _ABBREVIATIONS


def split_sentences(text: str) -> list[str]:
    """Split a whole text into sentences, keeping their punctuation; lines are always separate.

    >>> split_sentences("It is 3:05 PM. Pi is 3.14! 好的。再见")
    ['It is 3:05 PM.', 'Pi is 3.14!', '好的。', '再见']
    """
    divider = SentenceDivider()
    return divider.feed(text) + divider.flush()


def normalize(text: str) -> str:
    """Lower-case, drop apostrophes, turn other punctuation into spaces, collapse whitespace.

    "What's the TIME?" -> "whats the time". Used on both keywords and utterances.
    """
    out = []
    for ch in text.casefold():
        if ch in "'’`":
            continue
        cat = unicodedata.category(ch)
        out.append(" " if cat[0] in "PSZC" else ch)
    return " ".join("".join(out).split())


def is_cjk(text: str) -> bool:
    """Whether `text` has a Chinese, Japanese or Korean character (such keywords match as substrings)."""
    return any("\u2e80" <= ch <= "\u9fff" or "\uac00" <= ch <= "\ud7af" or "\uf900" <= ch <= "\ufaff"
               for ch in text)
