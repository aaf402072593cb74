"""CloudBrain: local first (reply table, memory), else the LLM providers in order, else local.

Implements the `Brain` protocol. The LLM reply streams through the pipeline stages and each
sentence is yielded as soon as it is complete. History per device is kept within a token budget;
after a barge-in `spoken()` replaces the last reply by the part that was actually played.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from typing import Any

from gateway.brain.history import History
from gateway.brain.llm import LlmProvider, ProviderFailed, ToolCall
from gateway.brain.tools import Toolbox
from gateway.brain.pipeline import SentenceDivider, shape
from gateway.memory.errors import MemoryError_
from gateway.memory.recall import MemoryBrain
from gateway.voice.brain import BrainContext, LocalBrain, Sentence, split_sentences

log = logging.getLogger(__name__)
MEMORY_HITS = 3
MAX_TOOL_ROUNDS = 3  # model -> tools -> model rounds per turn; the last round offers no tools
MEMORY_MIN_RELEVANCE = 0.25  # looser than MemoryBrain's own answer (0.55): the model judges the rest


class CloudBrain:
    def __init__(self, local: LocalBrain, providers: list[LlmProvider], *, memory: MemoryBrain | None = None,
                 system_prompt: str = "", history_tokens: int = 1500, clauses: bool = False,
                 tools: Toolbox | None = None, prestart: list[tuple[str, dict[str, str]]] | None = None) -> None:
        self.tools = tools or Toolbox([])
        self.prestart = prestart or []
        self.local = local
        self.memory = memory
        self.providers = providers
        self.system_prompt = system_prompt
        self.clauses = clauses
        self._history: dict[str, History] = {}
        self._budget = history_tokens

    def history(self, device_id: str) -> History:
        return self._history.setdefault(device_id, History(self._budget))

    async def close(self) -> None:
        for p in self.providers:
            await p.close()

    async def reply(self, utterance: str, ctx: BrainContext) -> AsyncIterator[str]:
        local = await self._local_answer(utterance, ctx)
        history = self.history(ctx.device_id)
        messages = await self._messages(utterance, ctx.device_id)
        history.add_turn(utterance, "")
        said: list[str] = []
        sentences = _iterate(split_sentences(local)) if local is not None else self._ask_llm(messages, ctx)
        try:
            async for sentence in sentences:
                said.append(sentence)
                # Updated before each yield only: after a barge-in nothing overwrites `spoken()`.
                history.replace_last_reply(" ".join(said))
                yield sentence
        finally:
            if self.memory is not None and said:
                self.memory.keep_turn(utterance, " ".join(said), ctx.device_id)

    def spoken(self, device_id: str, text: str) -> None:
        """After a barge-in: the last reply in the history becomes what was actually played."""
        self.history(device_id).replace_last_reply(text)

    async def _local_answer(self, utterance: str, ctx: BrainContext) -> str | None:
        if self.memory is not None:
            text = await self.memory.answer(utterance, ctx)
            return None if text == self.local.fallback else text
        return self.local.try_answer(utterance, ctx)

    async def _messages(self, utterance: str, device_id: str) -> list[dict[str, Any]]:
        prompt = self.system_prompt
        if facts := await self._memories(utterance, device_id):
            prompt += "\n\nWhat you remember about this user (use it only if it helps):\n" + "\n".join(
                f"- {f}" for f in facts)
        for name, arguments in self.prestart:
            filled = {k: v.replace("{{question}}", utterance) for k, v in arguments.items()}
            result = await self.tools.call(name, json.dumps(filled), device_id)
            prompt += f"\n\nContext from {name}:\n{result}"
        system = [{"role": "system", "content": prompt.strip()}] if prompt.strip() else []
        return [*system, *self.history(device_id).messages(), {"role": "user", "content": utterance}]

    async def _run_tools(self, calls: list[ToolCall], device_id: str) -> list[dict[str, Any]]:
        results = [await self.tools.call(c.name, c.arguments, device_id) for c in calls]
        log.info("brain: %s: tools %s", device_id, ", ".join(c.name for c in calls))
        return _tool_messages(calls, results)

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

    async def _ask_llm(self, messages: list[dict[str, Any]], ctx: BrainContext) -> AsyncIterator[str]:
        for provider in self.providers:
            divider = SentenceDivider(clauses=self.clauses)
            spoke = False
            turn = list(messages)
            try:
                for rounds_left in range(MAX_TOOL_ROUNDS, -1, -1):
                    calls: list[ToolCall] = []
                    async for item in provider.stream(turn, self.tools.schemas() if self.tools and rounds_left else None):
                        if isinstance(item, list):
                            calls = item
                            continue
                        for piece in divider.feed(item):
                            if text := _speakable(piece):
                                spoke = True
                                yield text
                    if not calls:
                        break
                    turn += await self._run_tools(calls, ctx.device_id)
                for piece in divider.flush():
                    if text := _speakable(piece):
                        spoke = True
                        yield text
            except ProviderFailed as exc:
                log.warning("brain: provider %s failed for %s: %s", exc.provider, ctx.device_id, exc.reason)
                if spoke:
                    return  # part of the reply was said: never repeat it from another provider
                continue
            if spoke:
                return
            log.warning("brain: provider %s failed for %s: nothing speakable", provider.name, ctx.device_id)
        if self.providers:
            log.warning("brain: every provider failed for %s; answering locally", ctx.device_id)
        for sentence in split_sentences(self.local.fallback):
            yield sentence


def _tool_messages(calls: list[ToolCall], results: list[str]) -> list[dict[str, Any]]:
    asked = {"role": "assistant", "content": None, "tool_calls": [
        {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}} for c in calls]}
    return [asked, *({"role": "tool", "tool_call_id": c.id, "content": r} for c, r in zip(calls, results))]


def _speakable(piece: str) -> Sentence:
    """The piece as a `Sentence` (TTS says the str; screens show `.display`; `.hints` drive the
    Action/Sentiment packets); empty, so falsy, when nothing in it can be spoken."""
    return shape(piece)


async def _iterate(items: list[str]) -> AsyncIterator[str]:
    for item in items:
        yield item
