"""A decoder repeating itself is caught as the tokens arrive; speech that repeats a word is not."""

from __future__ import annotations

from gateway.engines.decode_loop import loop_start


def _first_loop(ids: list[int]) -> tuple[int, int] | None:
    """(tokens decoded when the loop is seen, tokens kept), feeding ids one at a time like a decoder."""
    for n in range(1, len(ids) + 1):
        if (keep := loop_start(ids[:n])) is not None:
            return n, keep
    return None


def test_a_repeated_sentence_stops_at_its_second_copy_and_keeps_the_first() -> None:
    sentence = [11, 12, 13, 14, 15, 16]
    assert _first_loop([7, *sentence, *sentence, *sentence]) == (13, 7)


def test_a_short_span_repeated_four_times_is_a_loop() -> None:
    # "3-Me-Me-Me-Me-Me": the span (-, Me) from its fourth copy on
    assert _first_loop([3, 8, 9, 8, 9, 8, 9, 8, 9, 8, 9]) == (9, 3)


def test_a_word_said_two_or_three_times_is_kept() -> None:
    assert _first_loop([5, 6, 6, 7]) is None  # "very very"
    assert _first_loop([1, 2, 2, 2, 3]) is None  # "no, no, no"
    assert _first_loop([1, 2, 3, 1, 2, 3, 4]) is None  # a three-token phrase said twice
    assert _first_loop([]) is None
