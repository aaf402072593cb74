"""The expression service per device: packets by capability, bus events, servo reset on barge-in."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from firmware_protocol import Action, Capability, Sentiment, ServoKeyframes
from gateway.brain.contract import Sentence
from gateway.bus import EventBus
from gateway.engines.base import SynthChunk
from gateway.expression.service import ExpressionService, SentenceExpressed

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "config"


def service(bus: EventBus | None = None) -> ExpressionService:
    return ExpressionService.from_paths(CONFIG / "action_rules.csv", CONFIG / "sentiment.yaml",
                                        CONFIG / "servo_map.yaml", 40, bus)


def speech(seconds: float) -> list[SynthChunk]:
    rate = 16000
    t = np.arange(int(seconds * rate)) / rate
    return [SynthChunk((8000 * np.sin(2 * np.pi * 180 * t)).astype(np.int16), rate)]


def test_an_aborted_reply_frees_the_servos_for_the_next_lower_priority_action() -> None:
    svc = service()
    hook = svc.hook_for("robot-1", Capability.SERVO)
    assert hook is not None
    # celebrate (92) moves for ~1.1 s, its sentence lasts 0.3 s: the next sentence starts while it runs
    assert any(isinstance(m, ServoKeyframes) for m in hook(Sentence("Congratulations, that is great!"), speech(0.3), 1))
    assert hook(Sentence("Thank you."), speech(1), 2) == []  # thanks (61) does not interrupt it
    svc.reply_aborted("robot-1")  # the session's barge-in (BargedIn that cut stream 1)
    assert [type(m) for m in hook(Sentence("Thank you."), speech(1), 3)] == [ServoKeyframes]


def test_every_sentence_is_published_for_screens_even_for_a_plain_device() -> None:
    bus = EventBus()
    sub = bus.subscribe(SentenceExpressed)
    svc = service(bus)
    hook = svc.hook_for("box-1", Capability.AUDIO_IN | Capability.AUDIO_OUT)
    assert hook is not None and hook(Sentence("Goodbye!"), speech(0.5), 7) == []  # nothing for the device itself
    sentence = sub.queue.get_nowait()
    assert isinstance(sentence, SentenceExpressed) and sentence.stream_id == 7
    assert sentence.expression.action is not None and sentence.expression.action.code == "farewell.goodbye"
    assert len(sentence.pcm) == 2 * 8000 and sentence.sample_rate == 16000


def test_without_a_bus_a_device_that_wants_nothing_gets_no_hook() -> None:
    assert service().hook_for("box-2", Capability.AUDIO_IN | Capability.AUDIO_OUT) is None


def test_an_action_device_gets_action_then_sentiment_in_fay_units() -> None:
    hook = service().hook_for("box-3", Capability.ACTION)
    assert hook is not None
    action, sentiment = hook(Sentence("这边请"), speech(0.5), 4)
    assert action == Action(stream_id=4, code="guidance.invite", behavior="invite", affect="warm",
                            intensity=74, priority=82)
    assert isinstance(sentiment, Sentiment) and sentiment.stream_id == 4


def test_expression_setup_changes_the_mouth_frame_length_of_that_device_only() -> None:
    from firmware_protocol import ExpressionSetup, Mouth

    svc = service()
    slow = svc.hook_for("jaw-1", Capability.MOUTH)
    other = svc.hook_for("jaw-2", Capability.MOUTH)
    assert slow is not None and other is not None
    svc.configure("jaw-1", ExpressionSetup(mouth_frame_ms=100))
    (mouth,) = slow(Sentence("Goodbye!"), speech(1.0), 1)
    (default,) = other(Sentence("Goodbye!"), speech(1.0), 1)
    assert isinstance(mouth, Mouth) and (mouth.frame_ms, len(mouth.values)) == (100, 10)
    assert isinstance(default, Mouth) and (default.frame_ms, len(default.values)) == (40, 25)
