"""Word error rate, on normalised words (what was said, not how it was written).

Lower case; digits spelled out (`7` -> seven, `10:30` and the British `10.30` -> ten thirty,
`7:00` / `7.00` -> seven; `5th` stays `5th`: the corpus avoids ordinals); punctuation dropped (apostrophes too, `don't` -> dont);
hyphens split words; British and American spellings of the corpus's words made one. WER is the
word-level edit distance (substitutions + deletions + insertions) over the reference's length.
"""

from __future__ import annotations

import re

_ONES = ("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
         "fifteen sixteen seventeen eighteen nineteen").split()
_TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()
_SPELLING = {"center": "centre", "centers": "centres", "favorite": "favourite", "color": "colour",
             "okay": "ok", "goodnight": "good night", "tonite": "tonight"}


def number_words(n: int) -> str:
    if n < 20:
        return _ONES[n]
    if n < 100:
        return _TENS[n // 10] + ("" if n % 10 == 0 else " " + _ONES[n % 10])
    if n < 1000:
        rest = n % 100
        return _ONES[n // 100] + " hundred" + ("" if rest == 0 else " " + number_words(rest))
    return " ".join(_ONES[int(d)] for d in str(n))


def _numbers(match: re.Match[str]) -> str:
    hours, minutes = match.group(1), match.group(2)
    words = number_words(int(hours))
    if minutes is not None and int(minutes) != 0:
        words += " " + ("oh " + _ONES[int(minutes)] if int(minutes) < 10 else number_words(int(minutes)))
    return f" {words} "


def normalise(text: str) -> list[str]:
    text = text.lower().replace("-", " ")
    text = re.sub(r"(\d+)(?:[:.](\d\d)(?!\d))?", _numbers, text)
    text = re.sub(r"[^a-z0-9 ]+", "", text.replace("'", "").replace("\u2019", ""))
    words: list[str] = []
    for word in text.split():
        words += _SPELLING.get(word, word).split()
    return words


def edit_distance(ref: list[str], hyp: list[str]) -> int:
    prev = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, 1):
        cur = [i] + [0] * len(hyp)
        for j, h in enumerate(hyp, 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (r != h))
        prev = cur
    return prev[-1]


def wer(refs: list[str], hyps: list[str]) -> float:
    """Corpus WER: total edits over total reference words."""
    edits = words = 0
    for ref, hyp in zip(refs, hyps, strict=True):
        r = normalise(ref)
        edits += edit_distance(r, normalise(hyp))
        words += len(r)
    return edits / words if words else 0.0
