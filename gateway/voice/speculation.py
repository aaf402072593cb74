"""A reply started on the speculative transcript, before the endpoint is confirmed.

When trailing silence begins, the conversation already decodes the utterance speculatively. When
the device's brain session `speculates` (the LLM, the local and the memory brain) and
`brain.speculate` is on, the reply is asked for as soon as that transcript is ready: the brain's
slow part (an LLM's first sentence) then overlaps the rest of the endpoint wait instead of
following it. Only the first sentence is fetched ahead, and handed to `on_first` (the Speaker's
`prepare`: its first piece is synthesized during the rest of the wait); nothing is spoken before
the endpoint. If the user resumes, the reply is withdrawn (`BrainSession.withdraw`: the session
forgets the turn, history and memory) and its generator is closed, which cancels the LLM request. Pipeline timing only: it needs nothing of the brain but its
contract (gateway/brain/contract.py).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

from gateway.brain.contract import BrainContext, BrainSession, Sentence

log = logging.getLogger(__name__)


class SpeculativeReply:
    """Decode (already running) -> session.reply -> its first sentence, held until `sentences()`."""

    def __init__(self, session: BrainSession, ctx: BrainContext, decode: asyncio.Task[tuple[str, float]],
                 on_first: Callable[[Sentence], None] | None = None) -> None:
        self._session = session
        self._on_first = on_first  # given the first sentence as soon as it is there
        self._ctx = ctx
        self._device_id = ctx.device_id
        self.decode = decode
        self.text: str | None = None
        self.started: float | None = None  # clock time the brain was asked
        self.first_at: float | None = None  # clock time its first sentence was there
        self._gen: AsyncIterator[Sentence] | None = None
        self._first = asyncio.create_task(self._fetch_first())

    async def _fetch_first(self) -> Sentence | None:
        self.text, _ = await self.decode
        if not self.text:
            return None
        self.started = time.monotonic()
        self._gen = self._session.reply(self.text, self._ctx)
        try:
            first = await anext(self._gen)
        except StopAsyncIteration:
            return None
        finally:
            self.first_at = time.monotonic()
        if self._on_first is not None:
            self._on_first(first)
        return first

    async def sentences(self) -> AsyncIterator[Sentence]:
        """The endpoint is confirmed: the held first sentence, then the rest of the reply."""
        first = await self._first
        if first is None or self._gen is None:
            return
        gen = self._gen
        try:
            yield first
            async for sentence in gen:
                yield sentence
        finally:
            await _close_unless_running(gen)

    async def withdraw(self) -> None:
        """The user went on speaking: drop the reply and let the brain forget the turn."""
        if self.started is not None:
            self._session.withdraw()
            log.debug("%s: speculative reply to %r withdrawn", self._device_id, self.text)
        await self.close()

    async def close(self) -> None:
        """Stop fetching and close the brain's reply (its LLM request is cancelled); idempotent."""
        self._first.cancel()
        await asyncio.gather(self._first, return_exceptions=True)
        if self._gen is not None:
            await _close_unless_running(self._gen)


async def _close_unless_running(gen: AsyncIterator[Sentence]) -> None:
    """Close the brain's reply generator, unless it is running in another task, which then
    unwinds it: the speaker's task after a barge-in, or, when the event loop finalises a dropped
    session's generators (each in a task of its own, in no set order), the close of the
    generator itself, already in its `finally`."""
    if not gen.ag_running:  # type: ignore[attr-defined]
        await gen.aclose()  # type: ignore[attr-defined]


@dataclass
class Speculation:
    """An utterance's speculative decode and the reply asked on it (when the brain speculates),
    held by the conversation until the endpoint hands them to the turn or the speech resumes."""

    decode: asyncio.Task[tuple[str, float]]
    reply: SpeculativeReply | None = None

    async def drop(self, drop_prepared: Callable[[], None]) -> None:
        """Forget it: the early reply withdrawn (and the audio prepared for it dropped), the decode
        cancelled and awaited (a thread already decoding finishes; its result is ignored)."""
        if self.reply is not None:
            await self.reply.withdraw()
            drop_prepared()
        self.decode.cancel()
        await asyncio.gather(self.decode, return_exceptions=True)
