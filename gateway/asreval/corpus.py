"""The held-out sentences and the voices that speak them.

40 everyday requests and remarks for a home voice box, none of which the tests or `gateway bench`
use. Each sentence is spoken by one voice, in turn, so every voice speaks every tenth sentence.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

SENTENCES: tuple[str, ...] = (
    "Please turn off the kitchen lights.",
    "Remind me to water the plants tomorrow morning.",
    "How long should I boil an egg?",
    "Play some quiet music in the living room.",
    "Is it going to rain this afternoon?",
    "Set a timer for ten minutes.",
    "Call my daughter when you have a moment.",
    "I took my blood pressure pills after breakfast.",
    "Open the curtains in the bedroom.",
    "What should I cook for dinner tonight?",
    "The front door is still unlocked.",
    "Tell me a short story about a brave little fox.",
    "Add milk and bread to the shopping list.",
    "My back hurts a little today.",
    "When is the next bus to the city centre?",
    "Turn the heating up by two degrees.",
    "Read me the news headlines.",
    "I would like a cup of tea.",
    "Wake me up at seven tomorrow.",
    "The robot should wave to our guests.",
    "Where did I put my glasses?",
    "Please speak a little more slowly.",
    "How many steps did I walk yesterday?",
    "Switch the fan on in the study.",
    "Our cat has not eaten anything since noon.",
    "Could you spell the word necessary for me?",
    "Lock the garage and close the windows.",
    "I feel much better than last week.",
    "What is the capital of Australia?",
    "Stop the music and be quiet please.",
    "Write down that the plumber comes on Friday.",
    "Dim the lamp next to the sofa.",
    "My grandson plays football every Saturday.",
    "How far away is the moon?",
    "Measure my temperature again later.",
    "The washing machine has finished its cycle.",
    "Send a message to the doctor about my knee.",
    "Pause the film for five minutes.",
    "Which day is the rubbish collected?",
    "Good night, and switch everything off.",
)


@dataclass(frozen=True)
class Voice:
    engine: Literal["piper", "espeak-ng"]
    name: str  # piper: the manifest voice; espeak-ng: a voice with variant (`-v`)
    speed: float  # 1.0 = the voice's normal rate; 1.25 = 25% faster
    pitch: int = 50  # espeak-ng only (0-99)

    @property
    def label(self) -> str:
        return f"{self.engine}:{self.name}@{self.speed:g}"


VOICES: tuple[Voice, ...] = (
    Voice("piper", "piper-joe-medium", 1.0),
    Voice("piper", "piper-joe-medium", 1.25),
    Voice("piper", "piper-joe-medium", 0.85),
    Voice("espeak-ng", "en-us", 1.0),
    Voice("espeak-ng", "en-gb+f3", 1.0, pitch=60),
    Voice("espeak-ng", "en-gb-scotland", 1.15),
    Voice("espeak-ng", "en-us+m3", 0.85, pitch=40),
    Voice("espeak-ng", "en-gb-x-rp+f4", 1.1, pitch=65),
    Voice("espeak-ng", "en-029", 1.0),
    Voice("piper", "piper-joe-medium", 1.1),
)


def assignment() -> list[tuple[str, Voice]]:
    """Every sentence with the voice that speaks it (voice i speaks sentences i, i+10, ...)."""
    return [(text, VOICES[k % len(VOICES)]) for k, text in enumerate(SENTENCES)]
