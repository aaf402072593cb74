"""How well the real ASR hears a reply synthesized in pieces: each piece's share of words heard."""

from __future__ import annotations

from gateway.brain.text import normalize


def heard_per_piece(pieces: list[str], hearing: str) -> list[float]:
    """For each piece, the share of its words found in the hearing, in order: the words of the whole
    sentence matched to the hearing's by a longest common subsequence, counted piece by piece."""
    words = [(i, word) for i, piece in enumerate(pieces) for word in normalize(piece).split()]
    owner, ref, hyp = [i for i, _ in words], [w for _, w in words], normalize(hearing).split()
    best = [[0] * (len(hyp) + 1) for _ in range(len(ref) + 1)]
    for i in range(len(ref) - 1, -1, -1):
        for j in range(len(hyp) - 1, -1, -1):
            best[i][j] = best[i + 1][j + 1] + 1 if ref[i] == hyp[j] else max(best[i + 1][j], best[i][j + 1])
    found = [0] * len(pieces)
    i = j = 0
    while i < len(ref) and j < len(hyp):
        if ref[i] == hyp[j]:
            found[owner[i]] += 1
            i, j = i + 1, j + 1
        elif best[i + 1][j] >= best[i][j + 1]:
            i += 1
        else:
            j += 1
    return [found[k] / owner.count(k) for k in range(len(pieces))]
