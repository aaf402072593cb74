"""Servo mapping: Action -> ServoKeyframes for boards that do not map actions themselves.

The map (`config/servo_map.yaml`, hot-reloaded) gives per channel its limits and neutral angle,
per behavior keyframes authored at intensity 1.0, and per affect an LED colour and face. For one
action: each angle is scaled around its channel's neutral by the intensity, clamped to the
channel's limits (always, whatever the map says), and every channel used returns to neutral
`return_ms` after the last keyframe, so an idle robot is in its neutral pose.

`ServoPlayer` (one per device) follows the device's audio timeline: a sentence's motion starts
with its audio; while a motion runs, a lower-priority action does not interrupt it (no packet),
an equal or higher one replaces it.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from firmware_protocol import ServoKeyframes
from gateway.errors import ConfigError
from gateway.expression.rules import Action
from gateway.expression.sentence import SentenceExpression
from gateway.expression.watched import WatchedFile

MAX_TIME_MS = 0xFFFF


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Channel(_Strict):
    name: str = ""
    min: int = Field(ge=0, le=255)
    max: int = Field(ge=0, le=255)
    neutral: int = Field(ge=0, le=255)

    @model_validator(mode="after")
    def _ordered(self) -> "Channel":
        if not self.min <= self.neutral <= self.max:
            raise ValueError(f"needs min <= neutral <= max, got {self.min}, {self.neutral}, {self.max}")
        return self

    def clamp(self, angle: float) -> int:
        return max(self.min, min(self.max, round(angle)))


class Affect(_Strict):
    led: str = Field("", pattern=r"^(#[0-9A-Fa-f]{6})?$")
    face: str = ""

    @property
    def rgb(self) -> int:
        return int(self.led[1:], 16) if self.led else 0


class ServoMap(_Strict):
    return_ms: int = Field(300, ge=0, le=10000)
    channels: dict[int, Channel]
    behaviors: dict[str, tuple[tuple[int, int, int], ...]] = {}
    affects: dict[str, Affect] = {}

    @model_validator(mode="after")
    def _known_channels(self) -> "ServoMap":
        for behavior, frames in self.behaviors.items():
            for channel, _, t in frames:
                if channel not in self.channels:
                    raise ValueError(f"behaviors.{behavior}: channel {channel} is not in channels")
                if not 0 <= t <= MAX_TIME_MS:
                    raise ValueError(f"behaviors.{behavior}: time {t} ms is outside 0..{MAX_TIME_MS}")
        return self

    def keyframes(self, action: Action) -> tuple[tuple[int, int, int], ...]:
        """The motion for `action`, scaled, clamped, ending at neutral; () when none is mapped."""
        frames = self.behaviors.get(action.behavior, ())
        if not frames:
            return ()
        out = []
        for channel, angle, t in sorted(frames, key=lambda f: f[2]):
            ch = self.channels[channel]
            out.append((channel, ch.clamp(ch.neutral + (angle - ch.neutral) * action.intensity), t))
        end = min(MAX_TIME_MS, max(t for _, _, t in out) + self.return_ms)
        for channel in sorted({c for c, _, _ in out}):
            out.append((channel, self.channels[channel].neutral, end))
        return tuple(out)

    def neutral_pose(self) -> tuple[tuple[int, int, int], ...]:
        return tuple((c, ch.neutral, 0) for c, ch in sorted(self.channels.items()))


def parse_servo_map(text: str, source: str = "<memory>") -> ServoMap:
    try:
        data: Any = yaml.safe_load(text)
        return ServoMap.model_validate(data)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{source}: not valid YAML: {exc}") from None
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
        raise ConfigError(f"{source}: {re.sub(r'Value error, ', '', problems)}") from None


class ServoMapFile:
    """`config/servo_map.yaml`, re-read when it changes (a broken edit keeps the last good map)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._file: WatchedFile[ServoMap | None] = WatchedFile(self.path, lambda t: parse_servo_map(t, str(self.path)), None)

    def get(self) -> ServoMap | None:
        return self._file.get()


@dataclass
class _Running:
    priority: int
    ends_at: float


class ServoPlayer:
    """One device's servo motions, following its audio timeline (see module docstring)."""

    def __init__(self, servo_map: Callable[[], ServoMap | None], clock: Callable[[], float] = time.monotonic) -> None:
        self._map = servo_map
        self._clock = clock
        self._audio_end = 0.0  # when the audio queued so far ends (clock time)
        self._running: _Running | None = None

    def on_sentence(self, expr: SentenceExpression, stream_id: int) -> ServoKeyframes | None:
        start = max(self._clock(), self._audio_end)
        self._audio_end = start + expr.audio_ms / 1000
        servo_map = self._map()
        if expr.action is None or servo_map is None:
            return None
        frames = servo_map.keyframes(expr.action)
        if not frames:
            return None
        running = self._running
        if running is not None and start < running.ends_at and expr.action.priority < running.priority:
            return None
        self._running = _Running(expr.action.priority, start + frames[-1][2] / 1000)
        affect = servo_map.affects.get(expr.action.affect, Affect())
        return ServoKeyframes(stream_id=stream_id, keyframes=frames, led_rgb=affect.rgb, face=affect.face)

    def more_audio(self, audio_ms: float) -> None:
        """A later piece of the sentence's audio (a sentence streamed in pieces) extends its timeline."""
        self._audio_end += audio_ms / 1000

    def reset(self) -> None:
        """The reply was aborted: nothing is queued or running any more."""
        self._audio_end = 0.0
        self._running = None
