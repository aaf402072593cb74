"""Moonshine's text -> token ids, for scoring a text another engine heard (gateway/engines/asr_cross.py).

Moonshine ships its vocabulary only (tokenizer.bin -> tokens.txt: 32000 byte strings), which is
Llama's SentencePiece BPE vocabulary: `<unk> <s> </s>`, the 256 byte-fallback pieces, then the
merged pieces in merge order (`▁▁`, `▁t`, `er`, ...), the single characters last. SentencePiece's
BPE encodes by starting from the characters (spaces as `▁`, one `▁` added in front) and merging,
again and again, the adjacent pair whose merged piece has the best score; in this vocabulary the
score falls with the id, so the best merge is the one whose piece has the lowest id. That is what
`encode` does; a character outside the vocabulary becomes its UTF-8 bytes (byte fallback).
Checked against Moonshine's own decodes: the ids it emits for a transcript are the ids `encode`
gives for that transcript's text (tests/engines/test_asr_cross.py).
"""

from __future__ import annotations

SPACE = "\u2581"  # SentencePiece's word-start mark
_FIRST_PIECE = 259  # ids below: <unk>, <s>, </s> and the 256 byte-fallback pieces
_BYTE_BASE = 3  # the byte-fallback piece of byte b is id 3 + b


class MoonshineTokenizer:
    def __init__(self, tokens: list[bytes]) -> None:
        """`tokens`: id -> piece bytes, as tokens.txt lists them (moonshine_ort._read_tokens)."""
        self._ids: dict[str, int] = {}
        for index in range(_FIRST_PIECE, len(tokens)):
            try:
                piece = tokens[index].decode("utf-8")
            except UnicodeDecodeError:
                continue
            self._ids.setdefault(piece, index)

    def encode(self, text: str) -> list[int]:
        """The token ids of `text` (no start or end token); "" -> []."""
        if not text:
            return []
        symbols = list(SPACE + text.replace(" ", SPACE))
        while len(symbols) > 1:
            best, where = None, -1
            for i in range(len(symbols) - 1):
                merged = self._ids.get(symbols[i] + symbols[i + 1])
                if merged is not None and (best is None or merged < best):
                    best, where = merged, i
            if best is None:
                break
            symbols[where : where + 2] = [symbols[where] + symbols[where + 1]]
        ids: list[int] = []
        for symbol in symbols:
            if symbol in self._ids:
                ids.append(self._ids[symbol])
            else:
                ids += [_BYTE_BASE + b for b in symbol.encode("utf-8")]
        return ids
