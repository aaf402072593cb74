"""A greedy decoder caught in a loop: the same tokens over and over at the end of its output.

In noise a greedy sequence-to-sequence ASR (Moonshine) sometimes keeps repeating what it just
said until its length bound ("Open the cotton in the major. Open the cotton in the major. Open
the cotton in the major.", "3-Me-Me-Me-Me-Me-Me-Me-Me"): every copy after the first is a word
the user did not say. `loop_start` finds such a tail as the tokens arrive, so the decoder can
stop and keep the first copy: a span of at least `LONG` tokens said twice back to back (a
repeated phrase or sentence), or a shorter one said `SHORT_COPIES` times ("no, no, no" is still
heard as said).
"""

from __future__ import annotations

LONG = 4  # tokens: a span this long or longer, twice in a row, is a loop
SHORT_COPIES = 4  # a shorter span must come this many times in a row


def loop_start(ids: list[int]) -> int | None:
    """Where the repeated copies at the end of `ids` begin (keep ids[:that]), or None."""
    size = len(ids)
    for n in range(1, size // 2 + 1):
        copies = 2 if n >= LONG else SHORT_COPIES
        if n * copies > size:
            continue
        tail = ids[size - n :]
        if all(ids[size - k * n : size - (k - 1) * n] == tail for k in range(2, copies + 1)):
            return size - (copies - 1) * n
    return None
