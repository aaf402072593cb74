"""Hints of a reply sentence ([happy], a leading emoji) -> Action/Sentiment via config/hints.yaml."""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

import numpy as np

from firmware_protocol import Action as ActionMessage
from firmware_protocol import Capability, Sentiment
from gateway.engines.base import SynthChunk
from gateway.expression.device import DeviceExpression
from gateway.expression.hints import HintMap, parse_hints
from gateway.expression.rules import ActionRules
from gateway.expression.sentence import Expression
from gateway.expression.service import ExpressionService
from gateway.brain.contract import Hints, Sentence

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "config"


def expression(hints: Path = CONFIG / "hints.yaml") -> Expression:
    return Expression.from_paths(CONFIG / "action_rules.csv", CONFIG / "sentiment.yaml", 40, hints)


def speech(seconds: float = 0.4) -> list[SynthChunk]:
    rate = 16000
    t = np.arange(int(seconds * rate)) / rate
    return [SynthChunk((8000 * np.sin(2 * np.pi * 180 * t)).astype(np.int16), rate)]


def hinted(speech_text: str, *emotions: str, emoji: str = "", display: str = "") -> Sentence:
    return Sentence(speech_text, display or f"{emoji} {speech_text}".strip(), Hints(emotions, emoji))


def test_every_shipped_hint_names_an_action_of_the_shipped_rules_table(caplog) -> None:
    import yaml

    with caplog.at_level(logging.WARNING):
        table = parse_hints(yaml.safe_load((CONFIG / "hints.yaml").read_text(encoding="utf-8")), "hints.yaml")
    assert not caplog.records, "no broken entry in the shipped file"
    rules = ActionRules(CONFIG / "action_rules.csv")
    assert len(table.meanings) >= 20
    for key, meaning in table.meanings.items():
        assert meaning.action or meaning.sentiment is not None, key
        if meaning.action:
            assert rules.by_code(meaning.action) is not None, f"{key}: {meaning.action} is not in the table"


def test_a_hinted_action_wins_over_the_keyword_rule_and_comes_from_the_table_row() -> None:
    expr = expression()
    # "great" alone makes the keyword rules choose emotion.celebrate (priority 92)
    assert expr.analyse(Sentence("That is great news."), []).action.code == "emotion.celebrate"
    out = expr.analyse(hinted("That is great news.", "surprised"), [])
    assert out.action == expr.rules.by_code("emotion.surprise")
    assert (out.action.behavior, out.action.affect, out.action.intensity, out.action.priority) == (
        "surprise", "surprised", 0.88, 86)
    assert out.sentiment == expr.sentiment.score("That is great news.")  # surprised gives no sentiment


def test_a_hinted_sentiment_wins_over_the_lexicon() -> None:
    expr = expression()
    assert expr.analyse(Sentence("Great to see you again!"), []).sentiment == 2.0
    out = expr.analyse(hinted("Great to see you again!", "happy", emoji="😀"), [])
    assert (out.action.code, out.sentiment) == ("greeting.hello", 1.5)
    assert out.text == "Great to see you again!" and out.display == "😀 Great to see you again!"
    sad = expr.analyse(hinted("Great to see you again!", "sad"), [])
    assert (sad.action.code, sad.sentiment) == ("emotion.sad", -1.5)


def test_tags_come_first_in_order_then_the_emoji_and_each_part_is_taken_from_the_first_hint_giving_it() -> None:
    expr = expression()
    # surprised: action only; happy: action and sentiment; 😢: action and sentiment
    out = expr.analyse(hinted("Look at that.", "surprised", "happy", emoji="😢"), [])
    assert (out.action.code, out.sentiment) == ("emotion.surprise", 1.5)
    only_emoji = expr.analyse(hinted("Look at that.", emoji="😢"), [])
    assert (only_emoji.action.code, only_emoji.sentiment) == ("emotion.sad", -1.5)


def test_emoji_match_with_a_variation_selector_or_a_skin_tone() -> None:
    expr = expression()
    assert expr.analyse(hinted("Take care.", emoji="❤️"), []).action.code == "social.care"
    assert expr.analyse(hinted("Okay.", emoji="👍🏽"), []).action.code == "dialogue.confirm"


def test_unknown_tags_are_ignored_and_logged_at_debug_level(caplog) -> None:
    expr = expression()
    with caplog.at_level(logging.DEBUG, logger="gateway.expression.hints"):
        out = expr.analyse(hinted("Thank you for waiting.", "mysterious", emoji="🦖"), [])
    plain = expr.analyse(Sentence("Thank you for waiting."), [])
    assert (out.action, out.sentiment) == (plain.action, plain.sentiment)
    assert out.action.code == "social.thanks"
    levels = {r.getMessage(): r.levelno for r in caplog.records if r.name == "gateway.expression.hints"}
    assert levels == {"hints: unknown tag [mysterious] ignored": logging.DEBUG,
                      "hints: unknown emoji 🦖 ignored": logging.DEBUG}


def test_a_sentence_without_hints_is_analysed_exactly_as_a_plain_string() -> None:
    with_hints = expression()
    without = Expression.from_paths(CONFIG / "action_rules.csv", CONFIG / "sentiment.yaml", 40)
    chunks = speech()
    for text in ("Thank you, goodbye.", "That is great news.", "Hmm, let me think...", "好的，再见。"):
        reference = without.analyse(Sentence(text), chunks)
        assert with_hints.analyse(Sentence(text, text, Hints()), chunks) == reference
        assert with_hints.analyse(Sentence(text), chunks) == reference


def test_broken_entries_are_logged_and_skipped_and_the_others_work(tmp_path, caplog) -> None:
    path = tmp_path / "hints.yaml"
    path.write_text("happy: {action: greeting.hello}\n"
                    "bad1: {sentiment: 7}\n"
                    "bad2: just a string\n"
                    "bad3: {action: greeting.hello, colour: red}\n"
                    "ghost: {action: no.such.code, sentiment: -1}\n", encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="gateway.expression.hints"):
        expr = expression(path)
        assert expr.analyse(hinted("Fine.", "happy"), []).action.code == "greeting.hello"
        for tag in ("bad1", "bad2", "bad3"):
            assert expr.analyse(hinted("Fine.", tag), []) == expr.analyse(Sentence("Fine."), [])
        ghost = [expr.analyse(hinted("Thank you.", "ghost"), []) for _ in range(3)]
    # an action code the rules lack: the keyword rule decides, the sentiment still applies, one warning
    assert {(g.action.code, g.sentiment) for g in ghost} == {("social.thanks", -1.0)}
    messages = [r.getMessage() for r in caplog.records]
    assert sum("bad1" in m and "sentiment must be a number in -2..2" in m for m in messages) == 1
    assert sum("bad2" in m for m in messages) == 1 and sum("bad3" in m for m in messages) == 1
    assert sum("no.such.code" in m for m in messages) == 1


def test_an_edited_hints_file_takes_effect_without_a_restart(tmp_path) -> None:
    path = tmp_path / "hints.yaml"
    shutil.copy(CONFIG / "hints.yaml", path)
    hints = HintMap(path)
    rules = ActionRules(CONFIG / "action_rules.csv")
    assert hints.resolve(Hints(("happy",)), rules.by_code).action.code == "greeting.hello"
    path.write_text("happy: {action: emotion.celebrate, sentiment: 2}\n", encoding="utf-8")
    os.utime(path, ns=(1, 1))  # a different modification time even on a coarse clock
    result = hints.resolve(Hints(("happy",)), rules.by_code)
    assert (result.action.code, result.sentiment) == ("emotion.celebrate", 2.0)
    path.write_text("happy: [not, a, mapping", encoding="utf-8")  # broken: the last good table stays
    os.utime(path, ns=(2, 2))
    assert hints.resolve(Hints(("happy",)), rules.by_code).action.code == "emotion.celebrate"


def test_an_action_device_gets_the_hinted_action_and_sentiment_packets() -> None:
    svc = ExpressionService.from_paths(CONFIG / "action_rules.csv", CONFIG / "sentiment.yaml", None, 40,
                                       hints=CONFIG / "hints.yaml")
    hook = svc.hook_for("robot-1", Capability.ACTION)
    assert isinstance(hook, DeviceExpression)
    packets = hook(hinted("Great to see you again!", "happy", emoji="😀"), speech(), 7)
    assert packets == [
        ActionMessage(stream_id=7, code="greeting.hello", behavior="nod", affect="smile", intensity=35, priority=60),
        Sentiment(stream_id=7, tenths=15)]
    plain = hook(Sentence("Great to see you again!"), speech(), 8)
    assert [(type(p), getattr(p, "code", None), getattr(p, "tenths", None)) for p in plain] == [
        (ActionMessage, "emotion.celebrate", None), (Sentiment, None, 20)]
