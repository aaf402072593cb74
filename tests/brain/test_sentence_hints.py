"""The reply pipeline shapes each LLM sentence into a `Sentence`: speech text, display text and hints;
CloudBrain yields them (plain texts become hint-less `Sentence`s too)."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

from gateway.brain.cloud import CloudBrain
from gateway.brain.llm import LlmProvider
from gateway.brain.pipeline import shape
from gateway.brain.scripted import Script, ScriptedLlm
from gateway.config import BrainConfig, LlmProviderConfig
import dataclasses

import pytest

from gateway.brain.contract import BrainContext, Hints, Sentence, sentences_of
from gateway.brain.local import LocalBrain
from gateway.brain.replies import load_reply_table

ROOT = Path(__file__).resolve().parents[2]
CTX = BrainContext("box-hints", datetime(2026, 3, 1, 9, 30, tzinfo=timezone.utc))


def test_a_tagged_sentence_is_spoken_without_tag_and_emoji_and_shown_with_the_emoji() -> None:
    s = shape("[happy] 😀 Great to see you again!")
    assert s.speech == "Great to see you again!" and isinstance(s, Sentence)
    assert s.display == "😀 Great to see you again!"
    assert s.hints == Hints(("happy",), "😀")
    link = shape("[thinking] See https://example.org/a for **more**.")
    assert (link.speech, link.display) == ("See for more.", "See https://example.org/a for **more**.")
    assert link.hints == Hints(("thinking",))


def test_a_piece_with_nothing_to_say_has_no_speech_and_a_plain_piece_has_no_hints() -> None:
    assert not shape("😀 [happy]").speech
    assert not shape("<think>hidden</think>").speech
    plain = shape("It is sunny today.")
    assert (plain.speech, plain.display, bool(plain.hints)) == ("It is sunny today.", "It is sunny today.", False)


def test_a_sentence_carries_its_speech_display_and_hints_and_shows_its_speech_by_default() -> None:
    s = Sentence("Hello there.", "👋 Hello there.", Hints((), "👋"))
    assert (s.speech, s.display, s.hints) == ("Hello there.", "👋 Hello there.", Hints((), "👋"))
    plain = Sentence("plain")
    assert (plain.display, plain.hints) == ("plain", Hints())
    assert Sentence("Same.").display == "Same."
    assert sentences_of("Hello there! Bye.") == [Sentence("Hello there!"), Sentence("Bye.")]
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.speech = "changed"  # type: ignore[misc]


async def test_the_cloud_brain_yields_sentences_with_display_text_and_hints_and_keeps_speech_in_history() -> None:
    tokens = ["[happy] 😀 Great", " to see you again! ", "The plan is ", "ready."]
    async with ScriptedLlm([Script(tokens)]) as llm:
        local = LocalBrain(load_reply_table(ROOT / "config" / "replies.yaml"), BrainConfig().fallback)
        provider = LlmProvider(LlmProviderConfig(name="a", base_url=llm.url, model="m", api_key="k"))
        brain = CloudBrain(local, [provider])
        said = [s async for s in brain.session(CTX.device_id).reply("tell me about the weather on mars", CTX)]
        await brain.close()
    assert [s.speech for s in said] == ["Great to see you again!", "The plan is ready."]
    assert all(isinstance(s, Sentence) for s in said)
    assert [s.display for s in said] == ["😀 Great to see you again!", "The plan is ready."]
    assert [s.hints for s in said] == [Hints(("happy",), "😀"), Hints()]
    assert brain.history("box-hints").messages()[-1] == {
        "role": "assistant", "content": "Great to see you again! The plan is ready."}
