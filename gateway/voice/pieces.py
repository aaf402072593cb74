"""A long sentence synthesized in pieces: where to cut its text, and how its audio joins up again.

The TTS makes a sentence's audio only once the whole sentence is done (piper has no streaming
within a sentence), so a 40-word first sentence would keep its first audio back for its whole
synthesis. The Speaker instead synthesizes the first sentence of a reply clause by clause
(`synthesis_pieces`), sends the first clause's audio as soon as it is ready and the others, in the
same audio stream, behind it; the first piece is short to say (`spoken_words`: "7:45" takes three
words, so a memory answer's "Measured at 7:45 AM today:" is cut too). A reply's later sentences
are cut the same way (`later_pieces`), every piece of at most MAX_WORDS words, so that no
synthesis call holds a TTS worker long while another box's first piece waits (a call cannot be
taken back). A cut goes at a clause boundary where there is one; a clause longer than the bound is
cut into even parts, each cut moved to just before a phrase (`_ends_phrase`): piper says a piece's
last word as a sentence's last, drawn out, which a clause's or a phrase's last word bears best
(the figures are at `_ends_phrase`). `join_edges` trims each cut's silence to a natural pause
(piper ends every piece as if the sentence ended there: ~300 ms of silence after a comma) with a
short fade, so the pieces play as one stream without a gap or a click; the phoneme timings are
trimmed with the audio, so the visemes stay on it.
"""

from __future__ import annotations

import itertools
import re

import numpy as np

from gateway.brain.text import SentenceDivider
from gateway.engines.base import SynthChunk

MIN_WORDS = 3  # a shorter clause joins the next one (one word alone sounds clipped)
FIRST_WORDS = 6  # a sentence of more spoken words is cut; its first piece has at most this many
MAX_WORDS = 12  # a longer later clause is cut at word boundaries into even parts
CLAUSE_PAUSE_MS = 120  # silence kept at a cut after a comma, ;, : (both sides together)
WORD_PAUSE_MS = 30  # ... at a cut between words
FADE_MS = 5
_SILENT = 328  # |sample| below ~-40 dBFS counts as silence at the edges
_DIGITS = re.compile(r"\d+")
_PUNCTUATION = ",.;:!?\"'()[]“”‘’"
_PHRASE_STARTS = frozenset(
    "a an the and but or nor so yet of in on at to for from with without by near as that which who whom "
    "whose where when while than about after before into onto over under through during because if "
    "until since like".split())


def spoken_words(text: str) -> int:
    """About how many words `text` takes to say: a number is said in several ("7:45" is "seven
    forty-five", "128" "one hundred twenty-eight"), so it counts one more than its digit groups."""
    return sum(len(_DIGITS.findall(word)) + 1 if _DIGITS.search(word) else 1 for word in text.split())


def synthesis_pieces(text: str, first_words: int = FIRST_WORDS, max_words: int = MAX_WORDS) -> list[str]:
    """`text` cut into clauses of MIN_WORDS..`max_words` words, the first of at most `first_words`
    spoken words (its synthesis is what the first audio waits for, and takes as long as its audio);
    one piece when `text` is that short."""
    if spoken_words(text) <= first_words:
        return [text]
    divider = SentenceDivider(clauses=True)
    clauses = divider.feed(text) + divider.flush()
    merged: list[str] = []
    for clause in clauses:
        if merged and len(merged[-1].split()) < MIN_WORDS:
            merged[-1] = f"{merged[-1]} {clause}"
        else:
            merged.append(clause)
    if len(merged) > 1 and len(merged[-1].split()) < MIN_WORDS:
        merged[-2:] = [f"{merged[-2]} {merged[-1]}"]
    pieces: list[str] = []
    for clause in merged:
        words = clause.split()
        parts = -(-len(words) // max_words) if pieces else -(-spoken_words(clause) // first_words)
        # a first sentence's first piece is bounded by how long it takes to say: cut evenly
        phrased = bool(pieces) or first_words >= max_words
        pieces += [" ".join(part) for part in _parts(words, parts, max_words if phrased else 0)]
    return pieces


def _parts(words: list[str], parts: int, max_words: int) -> list[list[str]]:
    """`words` in `parts` even parts; with `max_words`, each cut moved by up to two words to just
    before a phrase (`_ends_phrase`) where the parts keep MIN_WORDS..`max_words` words, or in one
    part more when that puts more of the cuts between phrases."""
    if not max_words:
        return _even_parts(words, parts, 0)
    options = [_even_parts(words, n, max_words) for n in (parts, parts + 1)]
    return min(options, key=lambda option: (_cuts_inside_phrases(option), len(option)))


def _cuts_inside_phrases(parts: list[list[str]]) -> int:
    words = [w for part in parts for w in part]
    edges = itertools.accumulate(len(part) for part in parts[:-1])
    return sum(not _ends_phrase(words, cut) for cut in edges)


def _even_parts(words: list[str], parts: int, max_words: int) -> list[list[str]]:
    size = -(-len(words) // parts)
    cuts = list(range(size, len(words), size))
    for k, even in enumerate(cuts if max_words else ()):
        for cut in sorted(range(even - 2, even + 3), key=lambda c: (abs(c - even), c)):
            trial = [*cuts[:k], cut, *cuts[k + 1:]]
            edges = [0, *trial, len(words)]
            if _ends_phrase(words, cut) and all(MIN_WORDS <= b - a <= max_words for a, b in zip(edges, edges[1:])):
                cuts = trial
                break
    edges = [0, *cuts, len(words)]
    return [words[a:b] for a, b in zip(edges, edges[1:])]


def _ends_phrase(words: list[str], cut: int) -> bool:
    """A cut before `words[cut]` falls between phrases: that word starts one (an article,
    preposition, conjunction...) and the word before it does not. piper says a piece's last word
    as a sentence's last, drawn out: "the" before a cut inside a clause took 232 ms instead of 58
    ms, "in" 302 instead of 46, a phrase's last word ~1.8x ("window" 476 / 267 ms)."""
    def bare(word: str) -> str:
        return word.lower().strip(_PUNCTUATION)

    return 0 < cut < len(words) and bare(words[cut]) in _PHRASE_STARTS and bare(words[cut - 1]) not in _PHRASE_STARTS


def later_pieces(text: str, max_words: int = MAX_WORDS) -> list[str]:
    """A later sentence of a reply cut the same way, every piece of at most `max_words` words (its
    first too: nothing waits for it to be short to say, but no synthesis call may hold a TTS worker
    long while another box's first piece waits for one); one piece when it is that short."""
    return synthesis_pieces(text, first_words=max_words, max_words=max_words)


def ends_clause(piece: str) -> bool:
    return piece.rstrip("\"'”’)]").endswith((",", ";", ":", "，", "；", "：", "、"))


def join_edges(chunks: list[SynthChunk], *, keep_lead_ms: float | None, keep_tail_ms: float | None) -> list[SynthChunk]:
    """The piece's chunks with the leading / trailing silence cut to at most `keep_*_ms` (None:
    untouched, the sentence's own start or end) and faded in / out over FADE_MS at a cut."""
    if not chunks or (keep_lead_ms is None and keep_tail_ms is None):
        return chunks
    rate = chunks[0].sample_rate
    pcm = np.concatenate([c.pcm for c in chunks])
    loud = np.flatnonzero(np.abs(pcm.astype(np.int32)) > _SILENT)
    if loud.size == 0:
        return chunks
    start, end = 0, pcm.size
    if keep_lead_ms is not None:
        start = max(0, int(loud[0]) - int(rate * keep_lead_ms / 1000))
    if keep_tail_ms is not None:
        end = min(pcm.size, int(loud[-1]) + 1 + int(rate * keep_tail_ms / 1000))
    out = pcm[start:end].astype(np.float32)
    fade = min(out.size // 2, int(rate * FADE_MS / 1000))
    if fade:
        if keep_lead_ms is not None and start > 0:
            out[:fade] *= np.linspace(0.0, 1.0, fade, dtype=np.float32)
        if keep_tail_ms is not None and end < pcm.size:
            out[-fade:] *= np.linspace(1.0, 0.0, fade, dtype=np.float32)
    phonemes = [p for c in chunks for p in (c.phonemes or ())]
    timed = all(c.phonemes for c in chunks)
    trimmed = _trim_counts(phonemes, start, pcm.size - end) if timed else None
    return [SynthChunk(pcm=np.round(out).astype(np.int16), sample_rate=rate, phonemes=trimmed)]


def _trim_counts(phonemes: list[tuple[str, int]], lead: int, tail: int) -> tuple[tuple[str, int], ...]:
    """Phoneme sample counts with `lead` samples taken off the front and `tail` off the back."""
    pairs = [list(p) for p in phonemes]
    for order, cut in ((pairs, lead), (pairs[::-1], tail)):
        for pair in order:
            if cut <= 0:
                break
            take = min(pair[1], cut)
            pair[1] -= take
            cut -= take
    return tuple((p, n) for p, n in pairs if n > 0)
