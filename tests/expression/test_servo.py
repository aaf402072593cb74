"""Servo mapping: limits always enforced, intensity scaling, neutral at the end, priorities."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gateway.errors import ConfigError
from gateway.expression.rules import Action
from gateway.expression.sentence import SentenceExpression
from gateway.expression.servo import ServoMapFile, ServoPlayer, parse_servo_map

ROOT = Path(__file__).resolve().parents[2]

MAP = parse_servo_map("""
return_ms: 200
channels:
  0: {min: 60, max: 120, neutral: 90}
  1: {min: 0, max: 180, neutral: 0}
behaviors:
  wave: [[0, 170, 100], [0, 10, 300]]
  lift: [[1, 100, 100]]
affects:
  warm: {led: "#FF7F50", face: smile}
""")


def expr(action: Action | None, audio_ms: float = 1000) -> SentenceExpression:
    return SentenceExpression("x", action, 0.0, (), (), 40, audio_ms, True)


def test_angles_beyond_a_channels_limits_are_clamped_whatever_the_map_says() -> None:
    frames = MAP.keyframes(Action("a", "wave", intensity=1.0))
    assert frames == ((0, 120, 100), (0, 60, 300), (0, 90, 500))


def test_intensity_scales_the_motion_around_neutral() -> None:
    assert MAP.keyframes(Action("a", "lift", intensity=0.5)) == ((1, 50, 100), (1, 0, 300))
    assert MAP.keyframes(Action("a", "lift", intensity=0.0)) == ((1, 0, 100), (1, 0, 300))


def test_every_motion_ends_in_the_neutral_pose() -> None:
    frames = MAP.keyframes(Action("a", "wave", intensity=0.3))
    assert frames[-1] == (0, 90, 300 + 200)


def test_an_unmapped_behavior_gives_no_motion() -> None:
    assert MAP.keyframes(Action("a", "juggle")) == ()


def test_the_shipped_map_keeps_every_behavior_of_the_shipped_rules_within_limits() -> None:
    from gateway.expression.rules import ActionRules

    servo_map = ServoMapFile(ROOT / "config" / "servo_map.yaml").get()
    assert servo_map is not None
    for rule in ActionRules(ROOT / "config" / "action_rules.csv").rules:
        frames = servo_map.keyframes(rule.action)
        assert frames, rule.action.behavior
        for channel, angle, _ in frames:
            ch = servo_map.channels[channel]
            assert ch.min <= angle <= ch.max
        assert rule.action.affect in servo_map.affects


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_lower_priority_action_does_not_interrupt_a_running_higher_one() -> None:
    clock = Clock()
    player = ServoPlayer(lambda: MAP, clock)
    first = player.on_sentence(expr(Action("a", "wave", "warm", 1.0, 80), audio_ms=100), 1)
    assert first is not None and first.led_rgb == 0xFF7F50 and first.face == "smile"
    clock.now += 0.2  # the wave (0.5 s) still runs
    assert player.on_sentence(expr(Action("b", "lift", priority=10)), 2) is None
    assert player.on_sentence(expr(Action("c", "lift", priority=90)), 3) is not None


def test_once_the_motion_is_over_any_action_plays() -> None:
    clock = Clock()
    player = ServoPlayer(lambda: MAP, clock)
    assert player.on_sentence(expr(Action("a", "wave", priority=80), audio_ms=100), 1) is not None
    clock.now += 5
    assert player.on_sentence(expr(Action("b", "lift", priority=10)), 2) is not None


def test_sentences_queued_ahead_count_on_the_audio_timeline() -> None:
    clock = Clock()
    player = ServoPlayer(lambda: MAP, clock)
    assert player.on_sentence(expr(Action("a", "wave", priority=80), audio_ms=100), 1) is not None
    # synthesized at the same instant, but it starts after the first sentence's 100 ms of audio:
    # the wave (until 0.5 s) is still running then.
    assert player.on_sentence(expr(Action("b", "lift", priority=10), audio_ms=100), 2) is None


def test_a_broken_map_is_refused_with_the_reason() -> None:
    with pytest.raises(ConfigError, match="neutral"):
        parse_servo_map("channels: {0: {min: 10, max: 20, neutral: 90}}")
    with pytest.raises(ConfigError, match="channel 5"):
        parse_servo_map("channels: {0: {min: 0, max: 9, neutral: 1}}\nbehaviors: {nod: [[5, 1, 1]]}")


def test_map_edits_take_effect_without_a_restart_and_a_broken_edit_keeps_the_last_good_map(tmp_path: Path) -> None:
    path = tmp_path / "servo.yaml"
    path.write_text("channels: {0: {min: 0, max: 180, neutral: 90}}\nbehaviors: {nod: [[0, 120, 100]]}\n")
    servo = ServoMapFile(path)
    assert servo.get().keyframes(Action("a", "nod"))[0] == (0, 105, 100)

    def rewrite(text: str) -> None:
        path.write_text(text)
        st = path.stat()
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))

    rewrite("channels: {0: {min: 0, max: 180, neutral: 90}}\nbehaviors: {nod: [[0, 150, 100]]}\n")
    assert servo.get().keyframes(Action("a", "nod"))[0] == (0, 120, 100)
    rewrite("channels: [broken\n")
    assert servo.get().keyframes(Action("a", "nod"))[0] == (0, 120, 100)
