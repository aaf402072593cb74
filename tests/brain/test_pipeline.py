"""Reply pipeline stages: sentence divider over tokens, tags -> hints, speech filter, display text."""

from __future__ import annotations

from gateway.brain.pipeline import Hints, display_text, extract_hints, speech_text
from gateway.brain.text import SentenceDivider


def feed_all(divider: SentenceDivider, tokens: list[str]) -> list[list[str]]:
    return [divider.feed(t) for t in tokens]


def test_a_sentence_is_released_as_soon_as_its_end_and_the_next_space_arrive() -> None:
    d = SentenceDivider()
    assert feed_all(d, ["Hel", "lo there", ".", " How", " are you?", " Fine"]) == [
        [], [], [], ["Hello there."], [], ["How are you?"]]
    assert d.flush() == ["Fine"]


def test_decimals_times_and_abbreviations_do_not_end_a_sentence() -> None:
    d = SentenceDivider()
    assert d.feed("Pi is 3.14 and it is 3:05 now, Dr. Who said. ") == ["Pi is 3.14 and it is 3:05 now, Dr. Who said."]


def test_chinese_sentences_end_at_chinese_punctuation_without_spaces() -> None:
    d = SentenceDivider()
    assert d.feed("你好！今天天气很好。我们") == ["你好！", "今天天气很好。"]
    assert d.flush() == ["我们"]


def test_clause_mode_also_splits_at_commas_when_the_clause_is_long_enough() -> None:
    d = SentenceDivider(clauses=True)
    assert d.feed("Well, I think it will rain, so take an umbrella. 好的，我们走吧。") == [
        "Well, I think it will rain,", "so take an umbrella.", "好的，我们走吧。"]


def test_a_think_block_is_held_back_until_it_closes_and_comes_out_whole() -> None:
    d = SentenceDivider()
    assert d.feed("<think>The user wants. Hmm. ") == []
    assert d.feed("ok</think> Sure. ") == ["<think>The user wants. Hmm. ok</think>", "Sure."]


def test_tags_and_a_leading_emoji_become_hints_and_leave_the_text() -> None:
    assert extract_hints("😊 [happy] Nice to see you!") == ("Nice to see you!", Hints(("happy",), "😊"))
    assert extract_hints("I am [Sad] sorry.") == ("I am sorry.", Hints(("sad",), ""))


def test_speech_filter_drops_markdown_code_urls_emoji_tool_tags_and_think_blocks() -> None:
    assert speech_text("**Bold** and *it* see https://example.com/x now") == "Bold and it see now"
    assert speech_text("Run `ls` please ```python\nprint(1)\n``` done") == "Run ls please done"
    assert speech_text("[🔧 memory_search] Found it 😀!") == "Found it !"
    assert speech_text("<think>secret plan</think>") == ""
    assert speech_text("# Title") == "Title"
    assert speech_text("See [the docs](http://x.y) here.") == "See the docs here."


def test_display_text_keeps_emoji_and_links_but_not_tags_or_thinking() -> None:
    assert display_text("<think>x</think> [happy] Hi 😀 https://a.b") == "Hi 😀 https://a.b"
