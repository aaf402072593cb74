"""A brain for the pipeline tests: scripted sentences per utterance, and a record of what it was told."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

from gateway.brain.contract import BrainContext, Sentence


class ScriptedBrain:
    """Answers every utterance with `answer(utterance)` (a list of sentences), one by one.

    Records what it was asked, what the caller reported as played (`spoken`) and the withdrawn
    turns. `asked` is set when a reply was asked for (the speculative tests wait on it).
    """

    def __init__(self, answer: Callable[[str], list[str]], speculates: bool = False) -> None:
        self._answer = answer
        self.speculates = speculates
        self.utterances: list[str] = []
        self.played: list[str] = []
        self.withdrawn = 0
        self.asked = asyncio.Event()

    def session(self, device_id: str) -> "ScriptedBrain":
        return self

    async def reply(self, utterance: str, ctx: BrainContext) -> AsyncIterator[Sentence]:
        self.utterances.append(utterance)
        self.asked.set()
        for sentence in self._answer(utterance):
            yield Sentence(sentence)

    def spoken(self, *played: str) -> None:  # (text), or (device_id, text) in the older contract
        self.played.append(played[-1])

    def withdraw(self, *turn: str) -> None:
        self.withdrawn += 1
