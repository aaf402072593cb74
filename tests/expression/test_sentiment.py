"""Sentiment: Fay's keyword scoring, punctuation adjustment, clamp, hot reload."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gateway.errors import ConfigError
from gateway.expression.sentiment import Sentiment, parse_lexicon

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def sentiment() -> Sentiment:
    return Sentiment(ROOT / "config" / "sentiment.yaml")


@pytest.mark.parametrize(("text", "score"), [
    ("太好了", 2.0),
    ("没问题", 1.0),
    ("我有点担心", -1.0),
    ("我快崩溃了", -2.0),
    ("That is good.", 1.0),
    ("That is bad.", -1.0),
    ("The sky is blue.", 0.0),
])
def test_keyword_lists_weigh_plus_two_to_minus_two(sentiment: Sentiment, text: str, score: float) -> None:
    assert sentiment.score(text) == score


def test_matched_keywords_add_up(sentiment: Sentiment) -> None:
    assert sentiment.score("Good, good, fine.") == 2.0  # 3 x +1, clamped


def test_question_or_exclamation_lifts_and_ellipsis_lowers(sentiment: Sentiment) -> None:
    assert sentiment.score("Is it blue?") == 0.3
    assert sentiment.score("真的吗？") == 0.3
    assert sentiment.score("That is good!") == 1.3
    assert sentiment.score("Well...") == -0.3
    assert sentiment.score("嗯。。。") == -0.3


def test_score_is_clamped_to_two(sentiment: Sentiment) -> None:
    assert sentiment.score("太好了！完美！开心！") == 2.0
    assert sentiment.score("痛苦 绝望 崩溃") == -2.0


def test_a_chinese_keyword_inside_a_longer_one_is_not_counted_twice(sentiment: Sentiment) -> None:
    assert sentiment.score("不好") == -1.0


def test_english_matches_whole_words_case_insensitively(sentiment: Sentiment) -> None:
    assert sentiment.score("GOOD") == 1.0
    assert sentiment.score("goodness") == 0.0


def test_edits_take_effect_without_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text("positive: [sunny]\n", encoding="utf-8")
    s = Sentiment(path)
    assert s.score("sunny") == 1.0
    path.write_text("very_negative: [sunny]\n", encoding="utf-8")
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    assert s.score("sunny") == -2.0


def test_a_broken_file_keeps_the_last_good_lexicon(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text("positive: [sunny]\n", encoding="utf-8")
    s = Sentiment(path)
    path.write_text("positive: [unclosed\n", encoding="utf-8")
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    assert s.score("sunny") == 1.0


def test_unknown_list_names_are_rejected() -> None:
    with pytest.raises(ConfigError, match="very_positive"):
        parse_lexicon({"happy": ["x"]})
