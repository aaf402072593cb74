"""Stop words in one conversation (`listen.stop_words`, the words: gateway/voice/listen_mode.py).

A transcript that is only a stop word ends the reply and starts no turn: a turn's decode (and a
speculative one, so the brain is never asked "stop") is `screened`: a stop word raises `NoTurn`, on
which the Replier publishes nothing of the turn (no Transcript for the device) and stops any reply
still running (the conversation's barge-in at the speech start has usually stopped it already). Speech not addressed to the gateway while a
reply plays is transcribed only to look for a stop word (`check`): one such check at a time, the
newest; it interrupts the reply if it hears one.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

import numpy as np

from gateway.engines.runner import EngineRunner
from gateway.voice.listen_mode import StopWords
from gateway.voice.replier import NoTurn

log = logging.getLogger(__name__)


class StopCheck:
    def __init__(self, device_id: str, words: StopWords, runner: EngineRunner,
                 interrupt: Callable[[str], Awaitable[None]]) -> None:
        """`interrupt(reason)` is the conversation's barge-in."""
        self.device_id = device_id
        self._words = words
        self._runner = runner
        self._interrupt = interrupt
        self._task: asyncio.Task[None] | None = None

    def screened(self, decode: asyncio.Future[tuple[str, float]]) -> asyncio.Task[tuple[str, float]]:
        """The decode, raising NoTurn when its transcript is only a stop word."""
        async def run() -> tuple[str, float]:
            text, ms = await decode
            if text and self._words.matches(text):
                raise NoTurn(f"stop word {text!r}: the reply stops")
            return text, ms

        return asyncio.create_task(run(), name=f"screened decode {self.device_id}")

    def check(self, audio: np.ndarray) -> None:
        """Speech not addressed to the gateway while a reply plays: stop the reply if it was a stop word."""
        async def run() -> None:
            text = await self._runner.transcribe(audio, who=self.device_id)
            if self._words.matches(text):
                await self._interrupt(f"stop word {text!r}")
            else:
                log.info("%s: not addressed (no wake word): %r ignored", self.device_id, text)

        if self._task is not None:
            self._task.cancel()
        self._task = asyncio.create_task(run(), name=f"stop-word check {self.device_id}")

    async def close(self) -> None:
        """The running check cancelled and awaited."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
