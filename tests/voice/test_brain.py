"""The local brain: reply table matching, placeholders, sentence splitting, table validation."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.config import parse_config
from gateway.errors import ConfigError
from gateway.brain.contract import Brain, BrainContext
from gateway.brain.local import LocalBrain
from gateway.brain.text import split_sentences
from gateway.brain.replies import load_reply_table, parse_reply_table

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "config" / "replies.yaml"
NOW = datetime(2026, 11, 30, 15, 5, tzinfo=timezone(timedelta(hours=8)))  # a Monday afternoon
CTX = BrainContext("box-1", NOW)
FALLBACK = "Sorry, I did not catch that."


def brain(*intents: dict[str, Any]) -> LocalBrain:
    return LocalBrain(parse_reply_table({"intents": list(intents)}, "test.yaml"), FALLBACK)


def at(hour: int, minute: int = 0, day: int = 30) -> BrainContext:
    return BrainContext("box-1", NOW.replace(day=day, hour=hour, minute=minute))


TIME = {"name": "time", "keywords": ["what time is it"], "answers": ["It is {time}."]}


def test_what_time_is_it_answers_with_the_injected_time() -> None:
    assert brain(TIME).answer("What time is it?", CTX) == "It is 3:05 PM."


@pytest.mark.parametrize(
    ("hour", "minute", "spoken"),
    [(0, 0, "12:00 AM"), (0, 30, "12:30 AM"), (9, 7, "9:07 AM"), (12, 0, "12:00 PM"), (23, 59, "11:59 PM")],
)
def test_time_is_spoken_on_a_12_hour_clock(hour: int, minute: int, spoken: str) -> None:
    assert brain(TIME).answer("what time is it", at(hour, minute)) == f"It is {spoken}."


def test_date_and_weekday_placeholders_are_english_names() -> None:
    b = brain({"name": "date", "keywords": ["date"], "answers": ["{date}. It is {weekday}."]})
    assert b.answer("date", CTX) == "Monday, November 30. It is Monday."
    assert b.answer("date", at(10, day=1)) == "Sunday, November 1. It is Sunday."


def test_chinese_time_and_date_placeholders() -> None:
    b = brain({"name": "zh", "keywords": ["几点"], "answers": ["{time_zh}，{date_zh}，{weekday_zh}"]})
    assert b.answer("几点", CTX) == "下午3点05分，11月30日，星期一，星期一"
    assert b.answer("几点", at(8)) == "上午8点整，11月30日，星期一，星期一"


def test_unknown_question_gets_the_fallback() -> None:
    assert brain(TIME).answer("Tell me a story about dragons.", CTX) == FALLBACK
    assert brain(TIME).try_answer("Tell me a story about dragons.", CTX) is None


def test_empty_utterance_gets_the_fallback() -> None:
    assert brain(TIME).answer("   ", CTX) == FALLBACK


def test_keywords_ignore_case_and_punctuation() -> None:
    b = brain({"name": "time", "keywords": ["what's the time"], "answers": ["It is {time}."]})
    assert b.answer("WHAT'S THE TIME?!", CTX) == "It is 3:05 PM."
    assert b.answer("whats, the time", CTX) == "It is 3:05 PM."


def test_keywords_match_whole_words_only() -> None:
    b = brain({"name": "greeting", "keywords": ["hi"], "answers": ["Hello!"]})
    assert b.answer("hi there", CTX) == "Hello!"
    assert b.answer("this is history", CTX) == FALLBACK


def test_chinese_keywords_match_as_substrings_even_with_spaces() -> None:
    b = brain({"name": "time_zh", "keywords": ["现在几点"], "answers": ["现在是{time_zh}。"]})
    assert b.answer("请问现在几点了？", CTX) == "现在是下午3点05分。"
    assert b.answer("请问 现在 几 点", CTX) == "现在是下午3点05分。"


def test_first_matching_intent_wins() -> None:
    greeting = {"name": "greeting", "keywords": ["hello"], "answers": ["Hello!"]}
    assert brain(TIME, greeting).answer("hello, what time is it", CTX) == "It is 3:05 PM."
    assert brain(greeting, TIME).answer("hello, what time is it", CTX) == "Hello!"


def test_regex_named_groups_fill_the_answer() -> None:
    b = brain({"name": "introduce", "regex": r"my name is (?P<name>\w+)", "answers": ["Nice to meet you, {name}."]})
    assert b.answer("Hi, my name is Anna.", CTX) == "Nice to meet you, Anna."


def test_all_caps_or_lower_case_asr_text_is_spoken_in_title_case() -> None:
    b = brain({"name": "introduce", "regex": r"my name is (?P<name>\w+)", "answers": ["Hi {name}."]})
    assert b.answer("MY NAME IS ANNA", CTX) == "Hi Anna."
    assert b.answer("my name is anna", CTX) == "Hi Anna."
    assert b.answer("my name is McKay", CTX) == "Hi McKay."


def test_first_answer_is_used_unless_pick_is_rotate() -> None:
    fixed = brain({"name": "hi", "keywords": ["hi"], "answers": ["One.", "Two."]})
    assert [fixed.answer("hi", CTX) for _ in range(3)] == ["One.", "One.", "One."]
    rotating = brain({"name": "hi", "keywords": ["hi"], "answers": ["One.", "Two."], "pick": "rotate"})
    assert [rotating.answer("hi", CTX) for _ in range(3)] == ["One.", "Two.", "One."]


async def test_reply_yields_the_answer_sentence_by_sentence() -> None:
    b = brain({"name": "hi", "keywords": ["hi"], "answers": ["Hello! It is {time}. How can I help?"]})
    said = [s.speech async for s in b.session(CTX.device_id).reply("hi", CTX)]
    assert said == ["Hello!", "It is 3:05 PM.", "How can I help?"]


def test_local_brain_implements_the_brain_protocol() -> None:
    assert isinstance(brain(TIME), Brain)


def test_context_requires_a_timezone_aware_time() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        BrainContext("box-1", datetime(2026, 11, 30, 15, 5))


@pytest.mark.parametrize(
    ("text", "sentences"),
    [
        ("It is 3:05 PM.", ["It is 3:05 PM."]),
        ("Pi is 3.14. Nice!", ["Pi is 3.14.", "Nice!"]),
        ("Really?! Yes.", ["Really?!", "Yes."]),
        ('He said "hi." Then left.', ['He said "hi."', "Then left."]),
        ("Dr. Smith is here. Mr. Lee too.", ["Dr. Smith is here.", "Mr. Lee too."]),
        ("现在是下午3点。今天很好！你呢？", ["现在是下午3点。", "今天很好！", "你呢？"]),
        ("First line\nSecond line", ["First line", "Second line"]),
        ("no punctuation at all", ["no punctuation at all"]),
        ("  ", []),
    ],
)
def test_split_sentences_keeps_punctuation_and_times_together(text: str, sentences: list[str]) -> None:
    assert split_sentences(text) == sentences


@given(st.text())
def test_split_sentences_loses_no_text(text: str) -> None:
    parts = split_sentences(text)
    assert all(p and p == p.strip() for p in parts)
    assert "".join("".join(parts).split()) == "".join(text.split())


# ---- a broken table is reported with file, intent and problem --------------------------------


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "replies.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def load_error(tmp_path: Path, text: str) -> str:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_reply_table(path)
    assert str(path) in str(info.value)
    assert info.value.code == "config-invalid"
    return str(info.value)


def test_bad_regex_names_the_intent(tmp_path: Path) -> None:
    msg = load_error(tmp_path, "intents:\n - {name: hi, keywords: [hi], answers: [Hi.]}\n"
                               " - {name: broken, regex: 'my name is (', answers: [x]}\n")  # fmt: skip
    assert "intents[1] (broken)" in msg
    assert "'my name is ('" in msg and "not a valid Python regex" in msg


def test_missing_answers_names_the_intent(tmp_path: Path) -> None:
    msg = load_error(tmp_path, "intents:\n - {name: hi, keywords: [hi]}\n")
    assert "intents[0] (hi): answers is missing" in msg


def test_unknown_key_names_the_intent_and_the_key(tmp_path: Path) -> None:
    msg = load_error(tmp_path, "intents:\n - {name: hi, keyword: [hi], answers: [Hi.]}\n")
    assert "intents[0] (hi): unknown key keyword" in msg and "keywords" in msg


def test_bad_yaml_names_the_file(tmp_path: Path) -> None:
    assert "not valid YAML" in load_error(tmp_path, "intents: [\n")


def test_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"cannot read .*nope\.yaml"):
        load_reply_table(tmp_path / "nope.yaml")


@pytest.mark.parametrize(
    ("intent", "problem"),
    [
        ("{name: hi, answers: [Hi.]}", "needs keywords or a regex"),
        ("{keywords: [hi], answers: [Hi.]}", "name is missing"),
        ("{name: hi, keywords: hi, answers: [Hi.]}", "keywords must be a list of strings"),
        ("{name: hi, keywords: ['?!'], answers: [Hi.]}", "is empty once punctuation is ignored"),
        ("{name: hi, keywords: [hi], answers: ['It is {tme}.']}", "unknown placeholder {tme}"),
        ("{name: hi, keywords: [hi], answers: ['It is {time.']}", "unbalanced braces"),
        ("{name: hi, keywords: [hi], answers: ['Hi {name}.'], regex: '(?P<name>x)'}", "keyword match cannot fill"),
        ("{name: hi, regex: '(?P<time>x)', answers: [Hi.]}", "clashes with the built-in placeholder {time}"),
        ("{name: hi, keywords: [hi], answers: [Hi.], pick: random}", "pick = 'random' is not allowed"),
        ("{name: hi, keywords: [hi], answers: ['']}", "non-empty string"),
    ],
)
def test_invalid_intent_is_reported_with_its_problem(tmp_path: Path, intent: str, problem: str) -> None:
    assert problem in load_error(tmp_path, f"intents:\n - {intent}\n")


def test_duplicate_intent_names_are_rejected(tmp_path: Path) -> None:
    msg = load_error(tmp_path, "intents:\n - {name: hi, keywords: [hi], answers: [a]}\n"
                               " - {name: hi, keywords: [hey], answers: [b]}\n")  # fmt: skip
    assert "intents[1] (hi): name already used by intents[0]" in msg


@pytest.mark.parametrize("text", ["[]", "intents: []", "replies: []", "intents: [1]\nextra: 2"])
def test_table_must_be_a_mapping_with_a_non_empty_intents_list(tmp_path: Path, text: str) -> None:
    assert "intents" in load_error(tmp_path, text)


# ---- the shipped config/replies.yaml ------------------------------------------------------------


@pytest.fixture
def shipped() -> LocalBrain:
    """A fresh brain per test, so a rotating intent starts from its first answer."""
    return LocalBrain.from_config(parse_config({}, ROOT))


@pytest.mark.parametrize(
    ("utterance", "reply"),
    [
        ("Hello.", "Hello! How can I help you?"),
        ("Good morning!", "Hello! How can I help you?"),
        ("How are you?", "I am doing well, thank you for asking. How can I help you?"),
        ("Hi, what time is it?", "It is 3:05 PM."),
        ("Can you tell me what time it is right now?", "It is 3:05 PM."),
        ("Do you know what time it is?", "It is 3:05 PM."),
        ("Good morning, what day of the week is it?", "Today is Monday, November 30."),
        ("Tell me the date, please.", "Today is Monday, November 30."),
        ("Thank you very much for your help today.", "You are welcome."),
        ("What's the date today?", "Today is Monday, November 30."),
        ("WHAT DAY IS IT", "Today is Monday, November 30."),
        ("Who are you?", "I am your voice assistant. I run right here on your local gateway."),
        ("What is your name?", "I am your voice assistant. I run right here on your local gateway."),
        ("Thank you!", "You are welcome."),
        ("Goodbye.", "Goodbye. Talk to you soon."),
        ("My name is Anna.", "Nice to meet you, Anna."),
        ("MY NAME IS ANNA", "Nice to meet you, Anna."),
        ("What can you do?", "You can ask me the time or the date, tell me your name, or just say hello."),
        ("现在几点了？", "现在是下午3点05分。"),
        ("今天几号？", "今天是11月30日，星期一。"),
        ("谢谢", "不客气。"),
        ("再见", "再见，下次聊。"),
        ("你好", "你好！有什么可以帮你的吗？"),
        ("Tell me a story about dragons.", parse_config({}).brain.fallback),
    ],
)
def test_shipped_table_answers_the_built_in_intents(shipped: LocalBrain, utterance: str, reply: str) -> None:
    assert shipped.answer(utterance, CTX) == reply


def test_shipped_answers_are_plain_speakable_text() -> None:
    table = load_reply_table(SHIPPED)
    allowed = set(" .,!?'-:{}_") | set("。，！？：")
    for intent in table.intents:
        for answer in intent.answers:
            odd = {c for c in answer if not (c.isalnum() or c in allowed)}
            assert not odd, f"{intent.name}: {answer!r} has {odd} (no emoji or markdown in spoken replies)"
