"""The test helper that says how much of each piece of a reply the ASR heard."""

from __future__ import annotations

from tests.voice.hearing import heard_per_piece


def test_heard_per_piece_finds_a_lost_piece_and_forgives_a_misheard_word() -> None:
    pieces = ["the roses are in bloom,", "and the apple tree", "has leaves."]
    assert heard_per_piece(pieces, "The rose is are in bloom and the apple tree has leaves") == [0.8, 1.0, 1.0]
    assert heard_per_piece(pieces, "the roses are in bloom, has leaves") == [1.0, 0.0, 1.0]
    assert min(heard_per_piece(pieces, "and the apple tree the roses are in bloom has leaves")) < 0.5  # order
