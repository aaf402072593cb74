"""Closing a speculative reply while its brain generator is already being closed elsewhere.

When a session's tasks are dropped without being awaited (a connection torn down in the middle of a
turn), the event loop finalises the abandoned async generators itself, each in a task of its own
and in no set order: the brain's reply generator may already be unwinding its `finally` (awaiting
its background writes) when `SpeculativeReply.sentences()` is finalised and closes it too. That
second close must not fail with "aclose(): asynchronous generator is already running" (logged by
the loop as an error); the first close finishes the generator's clean-up."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest

from gateway.brain.contract import BrainContext, BrainSession, Sentence
from gateway.voice.speculation import SpeculativeReply

pytestmark = pytest.mark.asyncio(loop_scope="session")


class SlowToCloseSession(BrainSession):
    """A brain whose reply, when closed, waits for `release` in its `finally` (a memory write)."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.unwinding = asyncio.Event()
        self.closed = False

    async def reply(self, utterance: str, ctx: BrainContext) -> AsyncIterator[Sentence]:
        try:
            yield Sentence("First.")
            yield Sentence("Second.")
        finally:
            self.unwinding.set()
            await self.release.wait()
            self.closed = True


async def _decoded() -> tuple[str, float]:
    return "what is my name", 0.0


async def test_sentences_closed_while_the_brain_generator_is_closing_elsewhere() -> None:
    session = SlowToCloseSession()
    reply = SpeculativeReply(session, BrainContext("box-1", datetime.now(UTC)), asyncio.ensure_future(_decoded()))
    outer = reply.sentences()
    assert (await anext(outer)).speech == "First."
    assert (await anext(outer)).speech == "Second."  # the outer generator now sits in `async for`

    # The loop's finaliser closes the brain's generator first: it waits in its finally.
    inner = reply._gen
    assert inner is not None
    inner_close = asyncio.create_task(inner.aclose())  # type: ignore[attr-defined]
    await session.unwinding.wait()

    # ... then the outer one: its own close must not raise.
    outer_close = asyncio.create_task(outer.aclose())  # type: ignore[attr-defined]
    await asyncio.wait([outer_close], timeout=5)
    assert outer_close.done()
    assert outer_close.exception() is None

    session.release.set()
    await asyncio.wait_for(inner_close, 5)
    assert session.closed


async def test_close_after_sentences_ended_still_closes_the_brain_generator() -> None:
    session = SlowToCloseSession()
    session.release.set()
    reply = SpeculativeReply(session, BrainContext("box-1", datetime.now(UTC)), asyncio.ensure_future(_decoded()))
    outer = reply.sentences()
    assert (await anext(outer)).speech == "First."
    await outer.aclose()  # type: ignore[attr-defined]
    assert session.closed
