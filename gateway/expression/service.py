"""The expression service: builds each device session's sentence hook (the speaker's `on_sentence`:
called with each synthesized `Sentence`, see `gateway.expression.device.DeviceExpression`).

Every analysed sentence is also published on the event bus as a `SentenceExpressed` event, for
LAN screens and tools, whatever the device itself asked for. When a reply is cut (a barge-in), the
device session calls `reply_aborted`: the device's servo timeline stops.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from firmware_protocol import Capability, ExpressionSetup
from gateway.bus import EventBus
from gateway.config import GatewayConfig
from gateway.expression.device import DeviceExpression
from gateway.expression.sentence import Expression, SentenceExpression
from gateway.expression.servo import ServoMapFile, ServoPlayer
from gateway.engines.base import SynthChunk


@dataclass(frozen=True)
class SentenceExpressed:
    """Bus event: device `device_id` is about to speak a sentence (audio stream `stream_id`)."""

    device_id: str
    stream_id: int
    expression: SentenceExpression
    pcm: bytes  # the sentence's audio as the TTS made it: int16 little-endian mono
    sample_rate: int


class ExpressionService:
    def __init__(self, expression: Expression, servo_map: ServoMapFile | None = None,
                 bus: EventBus | None = None) -> None:
        self.expression = expression
        self.servo_map = servo_map
        self.bus = bus
        self._players: dict[str, ServoPlayer] = {}  # device id -> its servo player (one per device)
        self._hooks: dict[str, DeviceExpression] = {}  # device id -> its sentence hook

    @classmethod
    def from_paths(cls, rules: Path, sentiment: Path, servo_map: Path | None, frame_ms: int,
                   bus: EventBus | None = None, hints: Path | None = None) -> ExpressionService:
        return cls(Expression.from_paths(rules, sentiment, frame_ms, hints),
                   ServoMapFile(servo_map) if servo_map is not None else None, bus)

    @classmethod
    def from_config(cls, cfg: GatewayConfig, bus: EventBus | None = None) -> ExpressionService:
        e = cfg.expression
        return cls.from_paths(cfg.path(e.action_rules), cfg.path(e.sentiment), cfg.path(e.servo_map),
                              e.mouth_frame_ms, bus, cfg.path(e.hints))

    def reply_aborted(self, device_id: str) -> None:
        """The device's reply was cut (barge-in): its servo timeline stops, so the next sentence's
        motion may start whatever its priority."""
        if (player := self._players.get(device_id)) is not None:
            player.reset()

    def hook_for(self, device_id: str, capabilities: int) -> DeviceExpression | None:
        """The sentence hook for one device session, or None when nobody needs the analysis."""
        observers = ()
        if self.bus is not None:
            bus = self.bus

            def publish(expr: SentenceExpression, stream_id: int, chunks: list[SynthChunk]) -> None:
                pcm = b"".join(c.pcm.astype("<i2").tobytes() for c in chunks)
                rate = chunks[0].sample_rate if chunks else 16000
                bus.publish(SentenceExpressed(device_id, stream_id, expr, pcm, rate))

            observers = (publish,)
        servo = None
        if capabilities & Capability.SERVO and self.servo_map is not None:
            servo = self._players[device_id] = ServoPlayer(self.servo_map.get)
        hook = self._hooks[device_id] = DeviceExpression(self.expression, capabilities, servo, observers)
        return hook if hook.wants_anything else None

    def configure(self, device_id: str, setup: ExpressionSetup) -> None:
        """Apply a device's ExpressionSetup (its Mouth frame length) to its next sentences."""
        if (hook := self._hooks.get(device_id)) is not None:
            hook.mouth_frame_ms = setup.mouth_frame_ms
