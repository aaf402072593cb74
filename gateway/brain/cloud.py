"""CloudBrain: the reply table and memory, the LLM providers, and the local answer, per `route`.

Implements the `Brain` contract. `local_first`: the reply table / memory answer when they can, else
the LLM; `llm_first`: every question goes to the LLM and the reply table / memory answer only when
every provider failed (the memory's write side, e.g. remembering "my name is Anna", still runs for
every turn that was not withdrawn). The LLM reply streams through the pipeline stages and each sentence is
yielded as soon as it is complete (see `gateway.brain.fallback`); a reply cut after part of it was
said ends with `interrupted_reply`. The history is kept per user (`memory.users`; an unmapped device
has its own), within a token budget, with the turn's tool exchanges, in the shared brain. Each device
connection has its `CloudSession` (its newest turn, the turn waiting to reach the memory, the reply
it may `withdraw()`). A caller that plays the reply (`ctx.reports_playback`) reports what was
actually played with the session's `spoken()`: the history and the memory keep only that.
With a `history_store` (storage.backend postgres) the history is also kept there and read back
at each turn, so it is the person's across gateways (gateway/brain/history_store.py).
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import aclosing
from dataclasses import replace
from typing import Any

from gateway.brain.fallback import ProvidersFailed, ask_providers, tool_messages
from gateway.brain.history import History, Turn
from gateway.brain.history_store import HistoryStore, HistorySync
from gateway.brain.llm import LlmProvider, ToolCall
from gateway.brain.tools import Toolbox
from gateway.config import PrestartToolConfig
from gateway.memory.errors import MemoryError_
from gateway.brain.memory import MemoryBrain
from gateway.brain.contract import Brain, BrainContext, BrainSession, Sentence, sentences_of
from gateway.brain.local import LocalBrain

log = logging.getLogger(__name__)
MEMORY_HITS = 3
MEMORY_MIN_RELEVANCE = 0.25  # looser than MemoryBrain's own answer (0.55): the model judges the rest
ROUTES = ("local_first", "llm_first")  # local_only never builds a CloudBrain (see factory.build_brain)


class CloudBrain(Brain):
    def __init__(self, local: LocalBrain, providers: list[LlmProvider], *, memory: MemoryBrain | None = None,
                 system_prompt: str = "", history_tokens: int = 1500, clauses: bool = False,
                 tools: Toolbox | None = None, prestart: Sequence[PrestartToolConfig] = (),
                 route: str = "local_first", interrupted_reply: str = "Sorry, I lost the connection.",
                 users: Mapping[str, str] | None = None, history_store: HistoryStore | None = None) -> None:
        if route not in ROUTES:
            raise ValueError(f"route must be one of {', '.join(ROUTES)}, not {route!r}")
        self.tools = tools if tools is not None else Toolbox([])  # may be empty until MCP servers connect
        self.prestart = list(prestart)
        self.local = local
        self.memory = memory
        self.providers = providers
        self.system_prompt = system_prompt
        self.clauses = clauses
        self.route = route
        self.interrupted_reply = interrupted_reply
        self._users = users if users is not None else {}  # device id -> user id (a live mapping: not copied)
        self._history: dict[str, History] = {}
        self._budget = history_tokens
        self._shared = HistorySync(history_store, history_tokens) if history_store is not None else None

    def history_key(self, device_id: str) -> str:
        user = self._users.get(device_id)
        return f"user:{user}" if user else f"device:{device_id}"

    def history(self, device_id: str) -> History:
        """The conversation of the device's user (devices of one user share it)."""
        return self._history.setdefault(self.history_key(device_id), History(self._budget))

    async def current_history(self, device_id: str) -> History:
        """`history`, first brought up to date from the shared store (the other gateways' turns)."""
        history = self.history(device_id)
        if self._shared is not None and (stored := await self._shared.load(self.history_key(device_id))) is not None:
            history.adopt(stored)
        return history

    def _saved(self, device_id: str, turn: Turn) -> None:
        if self._shared is not None:
            self._shared.save(self.history_key(device_id), turn)

    def _deleted(self, device_id: str, turn: Turn) -> None:
        if self._shared is not None:
            self._shared.delete(self.history_key(device_id), turn.id)

    async def close(self) -> None:
        for p in self.providers:
            await p.close()
        if self.memory is not None:
            await self.memory.close()

    async def drain(self) -> None:
        if self._shared is not None:
            await self._shared.flush()
        if self.memory is not None:
            await self.memory.drain()

    def session(self, device_id: str) -> BrainSession:
        return CloudSession(self, device_id)

    def _remember(self, utterance: str, reply: str, device_id: str) -> None:
        if self.memory is not None and reply:
            self.memory.keep_turn(utterance, reply, device_id)

    async def _local_answer(self, utterance: str, ctx: BrainContext) -> tuple[str, str] | None:
        """The local answer and its source ("memory", "local"), or None (no intent, no memory)."""
        if self.memory is not None:  # llm_first: the introduction is remembered when the turn ends
            text, source = await self.memory.answered(utterance, ctx, capture=self.route == "local_first")
            return None if text == self.local.fallback else (text, source)
        text = self.local.try_answer(utterance, ctx)
        return None if text is None else (text, "local")

    async def _messages(self, utterance: str, device_id: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """The request's messages, and the prestart exchanges to keep in the history."""
        prompt = self.system_prompt
        if facts := await self._memories(utterance, device_id):
            prompt += "\n\nWhat you remember about this user (use it only if it helps):\n" + "\n".join(
                f"- {f}" for f in facts)
        kept: list[dict[str, Any]] = []
        for i, p in enumerate(self.prestart):
            filled = json.dumps({k: v.replace("{{question}}", utterance) for k, v in p.arguments.items()})
            result = await self.tools.call(p.tool, filled, device_id)
            prompt += f"\n\nContext from {p.tool}:\n{result}"
            if p.keep_in_history:
                kept += tool_messages([ToolCall(f"prestart_{i}", p.tool, filled)], [result])
        system = [{"role": "system", "content": prompt.strip()}] if prompt.strip() else []
        return [*system, *self.history(device_id).messages(), {"role": "user", "content": utterance}], kept

    async def _memories(self, utterance: str, device_id: str) -> list[str]:
        """The user's memories relevant to the question (not past conversation: that is the history)."""
        if self.memory is None:
            return []
        service = self.memory.memory
        try:
            hits = await service.search(service.user_for(device_id), utterance, MEMORY_HITS,
                                        weights=service.conversation_weights)
        except MemoryError_ as exc:
            log.warning("brain: memories for %s not searched: %s: %s", device_id, exc.code, exc.text)
            return []
        return [h.node.content for h in hits if h.node.type != "conversation" and h.relevance >= MEMORY_MIN_RELEVANCE]

    async def _ask_llm(self, messages: list[dict[str, Any]], turn: Turn, utterance: str,
                       ctx: BrainContext) -> AsyncIterator[Sentence]:
        exchanges: list[dict[str, Any]] = []  # this turn's tool exchanges, for the history
        try:
            async with aclosing(ask_providers(self.providers, messages, self.tools, ctx.device_id,
                                              clauses=self.clauses, exchanges=exchanges)) as sentences:
                async for sentence in sentences:
                    yield replace(sentence, source="llm")
            return
        except ProvidersFailed as exc:
            failure = exc
        finally:
            self.history(ctx.device_id).add_tools(turn, exchanges)
        if failure.spoke:
            log.warning("brain: the reply to %s was cut (%s); it ends locally", ctx.device_id, failure.reason)
            text, source = self.interrupted_reply, "local"
        else:
            log.warning("brain: every provider failed for %s (%s); answering locally", ctx.device_id,
                        failure.reason)
            text, source = (await self._local_answer(utterance, ctx) if self.route == "llm_first" else None) \
                or (self.local.fallback, "local")
        for sentence in sentences_of(text, source):
            yield sentence


class _Asked:
    """One reply of a session; `withdrawn` once it was taken back."""

    withdrawn = False


class CloudSession(BrainSession):
    """A connection's session of the LLM brain: its newest turn (what `spoken()` completes), the turn
    waiting for `spoken()` to reach the memory, and the reply being generated (what `withdraw()`
    takes back). The history itself is the user's, in the shared brain."""

    speculates = True  # the LLM's first sentence is slow: it may be asked before the endpoint

    def __init__(self, brain: CloudBrain, device_id: str) -> None:
        self._brain = brain
        self._device_id = device_id
        self._last: Turn | None = None
        self._unplayed: Turn | None = None
        self._asked: _Asked | None = None

    async def reply(self, utterance: str, ctx: BrainContext) -> AsyncIterator[Sentence]:
        brain, device_id = self._brain, self._device_id
        asked = self._asked = _Asked()
        local = await brain._local_answer(utterance, ctx) if brain.route == "local_first" else None
        history = await brain.current_history(device_id)
        messages, kept = await brain._messages(utterance, device_id) if local is None else ([], [])
        turn = self._last = history.start(utterance)
        history.add_tools(turn, kept)
        brain._saved(device_id, turn)  # in the shared store from its start, in the RAM history's order
        if ctx.reports_playback:
            self._unplayed = turn
        said: list[str] = []
        sentences = (_iterate(sentences_of(*local)) if local is not None
                     else brain._ask_llm(messages, turn, utterance, ctx))
        try:
            async with aclosing(sentences):  # closing the reply closes the LLM request at once
                async for sentence in sentences:
                    said.append(sentence.speech)
                    # Updated before each yield only: after a barge-in nothing overwrites `spoken()`.
                    history.set_reply(turn, " ".join(said))
                    yield sentence
        finally:
            if asked.withdrawn:
                self._forget(turn)
            else:
                brain._saved(device_id, turn)
                if brain.route == "llm_first" and brain.memory is not None:
                    brain.memory.capture_later(utterance, device_id)  # the memory did not answer
                if not ctx.reports_playback:
                    brain._remember(utterance, " ".join(said), device_id)

    def withdraw(self) -> None:
        """The reply being generated, asked on a speculative transcript, was abandoned before any of it
        was played (the user went on speaking; the voice pipeline asked it early): when its generator
        closes, the turn is forgotten (history, memory) as if it was never asked."""
        if self._asked is not None:
            self._asked.withdrawn = True

    def _forget(self, turn: Turn) -> None:
        self._brain.history(self._device_id).drop(turn)
        self._brain._deleted(self._device_id, turn)
        if self._last is turn:
            self._last = None
        if self._unplayed is turn:
            self._unplayed = None

    def spoken(self, text: str) -> None:
        """What was actually played of the last reply (after it ended or was interrupted): the history
        keeps only that, and so does the memory."""
        turn = self._last
        if turn is None:
            return
        self._brain.history(self._device_id).set_reply(turn, text)
        self._brain._saved(self._device_id, turn)
        if self._unplayed is turn:
            self._unplayed = None
            self._brain._remember(turn.user, text, self._device_id)


async def _iterate(items: list[Sentence]) -> AsyncIterator[Sentence]:
    for item in items:
        yield item
