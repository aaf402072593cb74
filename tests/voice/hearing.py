"""How well the real ASR hears a reply synthesized in pieces: each piece's share of words heard."""

from __future__ import annotations

from difflib import SequenceMatcher

from gateway.brain.text import normalize


def heard_per_piece(pieces: list[str], hearing: str) -> list[float]:
    """For each piece, the share of its words found in the hearing, in order: the words of the whole
    sentence matched to the hearing's (difflib's matching blocks), counted piece by piece."""
    words = [(i, word) for i, piece in enumerate(pieces) for word in normalize(piece).split()]
    owner = [i for i, _ in words]
    matcher = SequenceMatcher(None, [w for _, w in words], normalize(hearing).split(), autojunk=False)
    found = [0] * len(pieces)
    for start, _, size in matcher.get_matching_blocks():
        for k in owner[start: start + size]:
            found[k] += 1
    return [found[k] / owner.count(k) for k in range(len(pieces))]
