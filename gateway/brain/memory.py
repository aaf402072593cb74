"""MemoryBrain: the local brain with a memory, offline.

Implements the `Brain` contract around `LocalBrain` (its signatures are unchanged). Per utterance:
1. "my name is Anna" / "call me Anna" -> a persistent fact (`profile:name`) is remembered;
2. "what is my name?" -> answered from that fact;
3. "what was my blood pressure this morning?" -> the best matching sensor-reading observation in
   the time window said (this morning, today, tonight, yesterday; else the latest);
4. else the reply table; else a clearly relevant memory ("I remember: ..."); else the fallback.
Every turn (utterance + reply) is written as a conversation node, in the background, so the
reply is never delayed by the write; the next answer for the same user waits for the user's writes
still in flight, so it sees them. A caller that plays the reply (`ctx.reports_playback`) reports
what was actually played with its session's `spoken()`: only that is written (nothing when nothing
was played, nor for a withdrawn reply). The turn waiting for `spoken()` is kept in the connection's
`MemorySession`; the memory itself is the shared brain's.
When another brain answers the turn (CloudBrain, `brain.route: llm_first`), `capture_later` still
does the write side of step 1.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import re
from collections.abc import AsyncIterator, Coroutine
from datetime import datetime, timedelta
from typing import Any

from gateway.memory.errors import MemoryError_
from gateway.memory.service import MemoryService
from gateway.brain.contract import Brain, BrainContext, BrainSession, Sentence, sentences_of
from gateway.brain.local import LocalBrain

log = logging.getLogger(__name__)

_INTRODUCE = re.compile(r"\b(?:my name(?:\s+is|'s|’s|s)|call me)\s+(?P<name>[^\W\d_][\w'’-]*)", re.I)
_ASK_NAME = re.compile(r"\b(what(?:\s+is|'s|s)\s+my\s+name|do you (?:know|remember) my name|who am i)\b", re.I)
_ASK_READING = re.compile(
    r"\b(what|how|when)\b.*\bmy\b.*\b(blood pressure|pressure|pulse|heart rate|temperature|weight|glucose|sugar|"
    r"oxygen|spo2|steps|sleep|reading|readings)\b", re.I)
_WINDOWS = (("this morning", 0, 12, 0), ("this afternoon", 12, 18, 0), ("tonight", 17, 24, 0),
            ("this evening", 17, 24, 0), ("yesterday", 0, 24, 1), ("today", 0, 24, 0))
RECALL_MIN_RELEVANCE = 0.55


def _name_of(introduction: re.Match[str]) -> str:
    return introduction.group("name").strip("'’").capitalize()


def _window(utterance: str, now: datetime) -> tuple[str, float, float] | None:
    low = utterance.lower()
    for phrase, start_h, end_h, days_back in _WINDOWS:
        if phrase in low:
            day = (now - timedelta(days=days_back)).replace(hour=0, minute=0, second=0, microsecond=0)
            return phrase, (day + timedelta(hours=start_h)).timestamp(), (day + timedelta(hours=end_h)).timestamp()
    return None


def _clock(ts: float, now: datetime) -> str:
    when = datetime.fromtimestamp(ts, now.tzinfo)
    hour = f"{when:%I:%M %p}".lstrip("0")
    if when.date() == now.date():
        return f"at {hour} today"
    if when.date() == (now - timedelta(days=1)).date():
        return f"at {hour} yesterday"
    return f"on {when:%B} {when.day} at {hour}"


class MemoryBrain(Brain):
    def __init__(self, local: LocalBrain, memory: MemoryService) -> None:
        self.local = local
        self.memory = memory
        self._writes: dict[str, set[asyncio.Task[None]]] = {}  # by user: the background writes in flight

    def session(self, device_id: str) -> BrainSession:
        return MemorySession(self, device_id)

    def keep_turn(self, utterance: str, reply: str, device_id: str) -> None:
        """Write the turn to memory in the background (the reply is never delayed by it)."""
        self._background(self._remember_turn(utterance, reply, device_id), device_id)

    def capture_later(self, utterance: str, device_id: str) -> None:
        """The write side of `answer` without its answer (another brain answered the turn): an
        introduction ("my name is Anna") is remembered, in the background."""
        if m := _INTRODUCE.search(utterance):
            self._background(self._remember_name_logged(_name_of(m), device_id), device_id)

    def _background(self, write: Coroutine[Any, Any, None], device_id: str) -> None:
        """Owned: kept until written (its failure logged), awaited by `drain` and `close`, and by
        the next answer for the same user (`_settled`)."""
        user = self.memory.user_for(device_id)
        task = asyncio.create_task(write, name=f"memory write for {user}")
        self._writes.setdefault(user, set()).add(task)
        task.add_done_callback(functools.partial(self._written, user))

    def _written(self, user: str, task: asyncio.Task[None]) -> None:
        pending = self._writes.get(user, set())
        pending.discard(task)
        if not pending:
            self._writes.pop(user, None)
        if not task.cancelled() and (exc := task.exception()) is not None:
            log.error("memory: a background write failed: %s: %s", type(exc).__name__, exc)

    async def _settled(self, user: str) -> None:
        """The user's writes in flight land before an answer reads the memory, so "what is my name?"
        right after "my name is Anna" finds it on a slow board too. `asyncio.wait`, not `gather`:
        an answer cancelled meanwhile (the user spoke again) does not cancel the writes."""
        while pending := self._running([user]):
            await asyncio.wait(pending)

    def _running(self, users: list[str]) -> list[asyncio.Task[None]]:
        return [task for user in users for task in self._writes.get(user, ()) if not task.done()]

    async def drain(self) -> None:
        """Wait for the turn writes in flight (tests, shutdown)."""
        while pending := self._running(list(self._writes)):
            await asyncio.wait(pending)

    async def close(self) -> None:
        """The writes in flight end first (what was said is kept); the memory itself is the gateway's."""
        await self.drain()

    async def _remember_turn(self, utterance: str, reply: str, device_id: str) -> None:
        try:
            await self.memory.remember_turn(self.memory.user_for(device_id), utterance, reply, device_id)
        except MemoryError_ as exc:
            log.warning("memory: turn of %s not remembered: %s: %s", device_id, exc.code, exc.text)

    async def _remember_name(self, name: str, device_id: str) -> None:
        await self.memory.remember(self.memory.user_for(device_id), f"The user's name is {name}.", kind="fact",
                                   source=device_id, persistent=True, extra_tags=["profile:name"], importance=8)

    async def _remember_name_logged(self, name: str, device_id: str) -> None:
        try:
            await self._remember_name(name, device_id)
        except MemoryError_ as exc:
            log.warning("memory: the name of %s's user not remembered: %s: %s", device_id, exc.code, exc.text)

    async def answer(self, utterance: str, ctx: BrainContext, *, capture: bool = True) -> str:
        """The whole reply text, using the memory of the device's user. `capture=False`: without the
        write side (an introduction is not remembered; the caller does it with `capture_later`)."""
        return (await self.answered(utterance, ctx, capture=capture))[0]

    async def answered(self, utterance: str, ctx: BrainContext, *, capture: bool = True) -> tuple[str, str]:
        """`answer` and who gave it: "memory" (the memory was used) or "local" (the reply table, the
        fallback)."""
        user = self.memory.user_for(ctx.device_id)
        await self._settled(user)
        if m := _INTRODUCE.search(utterance):
            name = _name_of(m)
            if capture:
                await self._remember_name(name, ctx.device_id)
            return self.local.try_answer(utterance, ctx) or f"Nice to meet you, {name}. I will remember that.", "memory"
        if _ASK_NAME.search(utterance):
            facts = await self.memory.recent(user, 1, all_of=["profile:name"])
            if facts:
                return f"Your name is {facts[0].content.removeprefix('The user').split(' is ', 1)[1].rstrip('.')}.", "memory"
            return "You have not told me your name yet. Say: my name is, and then your name.", "memory"
        if _ASK_READING.search(utterance):
            return await self._reading_answer(user, utterance, ctx.now), "memory"
        if (table := self.local.try_answer(utterance, ctx)) is not None:
            return table, "local"
        hits = await self.memory.search(user, utterance, 3, weights=self.memory.conversation_weights)
        facts = [h for h in hits if h.node.type != "conversation" and h.relevance >= RECALL_MIN_RELEVANCE]
        if facts:
            return f"I remember: {facts[0].node.content.rstrip('.')}.", "memory"
        return self.local.fallback, "local"

    async def _reading_answer(self, user: str, utterance: str, now: datetime) -> str:
        window = _window(utterance, now)
        since, until = (window[1], window[2]) if window else (None, None)
        candidates = await self.memory.recent(user, 200, all_of=["kind:event"], any_of=["reading:*"],
                                              types=["observation"], since=since, until=until)
        if not candidates:
            when = f" {window[0]}" if window else ""
            return f"I have no readings for you{when}."
        q = (await self.memory.embed_query([utterance]))[0]
        scores = await self.memory.embed([c.content.split(", measured")[0] for c in candidates]) @ q
        best_rel = float(scores.max())
        # The best match by meaning; among equally good ones (same kind of reading), the newest.
        best = next(c for c, s in zip(candidates, scores) if s >= best_rel - 0.05)
        what = best.content.split(", measured")[0]
        return f"Measured {_clock(best.ts, now)}: {what}."


class MemorySession(BrainSession):
    """A connection's session of the memory brain: the turn whose reply waits for `spoken()`."""

    # It may be asked on the speculative transcript (the voice pipeline then synthesizes the first
    # piece during the endpoint wait): a reply the pipeline may still withdraw writes nothing; an
    # introduction is remembered once its reply stands (its generator ends without `withdraw`).
    speculates = True

    def __init__(self, brain: MemoryBrain, device_id: str) -> None:
        self._brain = brain
        self._device_id = device_id
        self._unplayed: str | None = None  # the utterance whose reply waits for `spoken()`
        self._withdrawn = False  # the reply being generated was withdrawn

    async def reply(self, utterance: str, ctx: BrainContext) -> AsyncIterator[Sentence]:
        if not ctx.reports_playback:  # nothing will withdraw it: written at once, as before
            text, source = await self._brain.answered(utterance, ctx)
            self._brain.keep_turn(utterance, text, self._device_id)
            for sentence in sentences_of(text, source):
                yield sentence
            return
        self._withdrawn = False
        text, source = await self._brain.answered(utterance, ctx, capture=False)
        self._unplayed = utterance
        try:
            for sentence in sentences_of(text, source):
                yield sentence
        finally:
            if not self._withdrawn:
                self._brain.capture_later(utterance, self._device_id)

    def spoken(self, text: str) -> None:
        """What was actually played of the last reply (after it ended or was interrupted): the turn is
        remembered with only that."""
        utterance, self._unplayed = self._unplayed, None
        if utterance is not None and text:
            self._brain.keep_turn(utterance, text, self._device_id)

    def withdraw(self) -> None:
        self._unplayed = None
        self._withdrawn = True
