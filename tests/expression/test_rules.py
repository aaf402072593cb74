"""Action rules: the shipped table, matching semantics, hot reload, broken rows."""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

import pytest

from gateway.expression.rules import HEADER, ActionRules, parse_rules

ROOT = Path(__file__).resolve().parents[2]
TABLE = ROOT / "config" / "action_rules.csv"

SEED_CODES = {
    "greeting.hello", "greeting.welcome", "farewell.goodbye", "dialogue.confirm", "dialogue.reject",
    "dialogue.think", "dialogue.question", "dialogue.explain", "dialogue.recommend", "dialogue.summary",
    "guidance.invite", "guidance.wait", "guidance.remind", "guidance.warn", "social.thanks",
    "social.apology", "social.care", "emotion.celebrate", "emotion.surprise", "emotion.sad",
}


@pytest.fixture
def rules() -> ActionRules:
    return ActionRules(TABLE)


def test_shipped_table_has_the_twenty_seed_rules_without_problems(rules: ActionRules) -> None:
    assert {r.action.code for r in rules.rules} == SEED_CODES
    assert rules.problems == ()


def test_every_shipped_rule_has_chinese_and_english_keywords(rules: ActionRules) -> None:
    for rule in rules.rules:
        assert any(any("\u4e00" <= c <= "\u9fff" for c in k) for k in rule.keywords), rule.action.code
        assert any(k.isascii() for k in rule.keywords), rule.action.code


@pytest.mark.parametrize(("text", "code"), [
    ("这边请", "guidance.invite"),
    ("您好，请问有什么可以帮您", "greeting.hello"),
    ("谢谢你的帮助", "social.thanks"),
    ("You are welcome.", "social.thanks"),
    ("Goodbye. Talk to you soon.", "farewell.goodbye"),
    ("HELLO there", "greeting.hello"),
    ("Please be careful with the stairs.", "guidance.warn"),
])
def test_sentences_map_to_the_seed_actions(rules: ActionRules, text: str, code: str) -> None:
    action = rules.match(text)
    assert action is not None and action.code == code


def test_seed_fields_are_carried_unchanged(rules: ActionRules) -> None:
    action = rules.match("这边请")
    assert action is not None
    assert action.to_fay() == {"code": "guidance.invite", "behavior": "invite", "affect": "warm",
                               "intensity": 0.74, "priority": 82}


def test_english_keywords_match_whole_words_only(rules: ActionRules) -> None:
    assert rules.match("This is a high shelf.") is None  # "hi" inside "high" / "this"
    assert rules.match("nothing here") is None  # "no" inside "nothing"


def test_highest_priority_wins_among_matches(rules: ActionRules) -> None:
    action = rules.match("Thank you, goodbye!")  # thanks 61, goodbye 72
    assert action is not None and action.code == "farewell.goodbye"


def test_no_keyword_means_no_action(rules: ActionRules) -> None:
    assert rules.match("The sky is blue today.") is None


def _write(path: Path, text: str) -> None:
    path.write_text(text, encoding="utf-8")
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))  # a distinct mtime even on coarse clocks


def test_edits_take_effect_without_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "rules.csv"
    shutil.copy(TABLE, path)
    rules = ActionRules(path)
    assert rules.match("ahoy sailor") is None
    _write(path, path.read_text(encoding="utf-8") + "greeting.pirate,wave,excited,0.9,99,1,ahoy|啊嘿\n")
    action = rules.match("ahoy sailor")
    assert action is not None and action.code == "greeting.pirate" and action.priority == 99


def test_a_broken_row_is_reported_with_its_line_and_the_rest_keeps_working(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "rules.csv"
    _write(path, ",".join(HEADER) + "\n"
           "greeting.hello,nod,smile,0.35,60,1,hello|你好\n"
           "broken.row,nod,smile,lots,60,1,oops\n"
           "social.thanks,thanks,warm,0.46,61,1,thanks|谢谢\n")
    with caplog.at_level(logging.WARNING):
        rules = ActionRules(path)
    assert [p.line for p in rules.problems] == [3]
    assert "line 3" in caplog.text and "broken.row" not in {r.action.code for r in rules.rules}
    assert rules.match("thanks")  is not None and rules.match("你好") is not None


def test_a_wrong_header_is_reported_as_line_one() -> None:
    rules, problems = parse_rules("code,behaviour\nx,y\n")
    assert rules == [] and problems[0].line == 1


def test_out_of_range_values_are_row_problems() -> None:
    text = ",".join(HEADER) + "\na,b,c,1.5,60,0,kw\nd,e,f,0.5,300,0,kw\ng,h,i,0.5,60,0,\n"
    rules, problems = parse_rules(text)
    assert rules == [] and [p.line for p in problems] == [2, 3, 4]


def test_a_deleted_file_keeps_the_last_good_table(tmp_path: Path) -> None:
    path = tmp_path / "rules.csv"
    shutil.copy(TABLE, path)
    rules = ActionRules(path)
    path.unlink()
    assert len(rules.rules) == 20
