"""What expression costs next to the TTS: CPU time of analysis + packets vs synthesis, per sentence.

`measure` synthesizes each sentence with the real TTS, then builds every expression packet a
device can ask for (visemes, mouth, action, sentiment, servo keyframes) from the result, and
reports both CPU times. The issue's budget: expression <= 2% of the TTS CPU time.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from firmware_protocol import Capability, encode
from gateway.brain.contract import Sentence
from gateway.engines.base import TtsEngine
from gateway.expression.device import DeviceExpression
from gateway.expression.sentence import Expression
from gateway.expression.servo import ServoMapFile, ServoPlayer

SENTENCES = (
    "You are welcome.", "Goodbye!", "Hello! How can I help you?", "Please be careful, the floor is wet.",
    "It is a quarter past nine in the morning.", "I am sorry, I did not catch that.",
    "Congratulations, that is great news!", "欢迎光临，这边请。",
)
ALL = Capability.VISEMES | Capability.MOUTH | Capability.ACTION | Capability.SERVO


@dataclass(frozen=True)
class ExpressionCost:
    sentences: int
    audio_s: float
    tts_cpu_s: float
    expression_cpu_s: float
    packet_bytes: int

    @property
    def ratio(self) -> float:
        return self.expression_cpu_s / self.tts_cpu_s if self.tts_cpu_s else 0.0


def measure(tts: TtsEngine, expression: Expression, servo_map: ServoMapFile | None,
            sentences: tuple[str, ...] = SENTENCES, repeat: int = 20,
            cpu: Callable[[], float] = time.process_time) -> ExpressionCost:
    tts_cpu = expr_cpu = audio_s = 0.0
    size = 0
    for text in sentences:
        started = cpu()
        chunks = list(tts.synthesize(text))
        tts_cpu += cpu() - started
        audio_s += sum(len(c.pcm) / c.sample_rate for c in chunks)
        hook = DeviceExpression(expression, ALL, ServoPlayer(servo_map.get) if servo_map else None)
        started = cpu()
        for _ in range(repeat):  # one analysis is too short for the CPU clock: average several
            packets = hook(Sentence(text), chunks, 1)
            size = sum(len(encode(p)) for p in packets)
        expr_cpu += (cpu() - started) / repeat
    return ExpressionCost(len(sentences), audio_s, tts_cpu, expr_cpu, size)


def report(cost: ExpressionCost) -> str:
    return (f"{cost.sentences} sentences, {cost.audio_s:.1f} s of speech: TTS {cost.tts_cpu_s * 1000:.0f} ms CPU, "
            f"expression (visemes, mouth, action, sentiment, servo) {cost.expression_cpu_s * 1000:.2f} ms CPU "
            f"= {cost.ratio * 100:.2f}% of the TTS")


def default_measure(tts: TtsEngine, root: Path) -> ExpressionCost:
    config = root / "config"
    expression = Expression.from_paths(config / "action_rules.csv", config / "sentiment.yaml")
    return measure(tts, expression, ServoMapFile(config / "servo_map.yaml"))
