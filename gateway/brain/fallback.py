"""The provider-fallback stream: the reply of the first LLM provider that answers, sentence by sentence.

Providers are tried in order. One that fails (error, garbage, no first token in time) before
anything speakable was said is logged with its name and the reason, and the next is tried. Once
part of a reply was said no other provider is tried (it would repeat it): `ProvidersFailed` with
`spoke=True` lets the caller close the reply locally. Each provider's turn runs a bounded tool
loop; the tool exchanges it made are appended to the caller's `exchanges` (for the history).
A provider whose last failure was a network one is skipped while it cools down (see
`gateway.brain.cooldown`): the next provider, or the local brain, answers without waiting.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import aclosing
from typing import Any

from gateway.brain.llm import LlmProvider, ProviderFailed, ToolCall
from gateway.brain.pipeline import shape
from gateway.brain.text import SentenceDivider
from gateway.brain.tools import Toolbox
from gateway.brain.contract import Sentence

log = logging.getLogger(__name__)
MAX_TOOL_ROUNDS = 3  # model -> tools -> model rounds per turn; the last round offers no tools


class ProvidersFailed(Exception):
    """No provider finished the reply: `spoke` tells whether part of it was already said."""

    def __init__(self, spoke: bool, reason: str) -> None:
        super().__init__(reason)
        self.spoke = spoke
        self.reason = reason


async def ask_providers(providers: Sequence[LlmProvider], messages: list[dict[str, Any]], tools: Toolbox,
                        device_id: str, *, clauses: bool = False,
                        exchanges: list[dict[str, Any]] | None = None) -> AsyncIterator[Sentence]:
    """Yield the reply's speakable sentences; raise ProvidersFailed when no provider finished it."""
    exchanges = [] if exchanges is None else exchanges
    mark = len(exchanges)
    reasons: list[str] = []
    for provider in providers:
        if (left := provider.cooldown.remaining()) > 0:
            reasons.append(f"{provider.name}: cooling down ({left:.1f} s left)")
            continue
        del exchanges[mark:]  # a failed provider's tool exchanges are not part of the conversation
        divider = SentenceDivider(clauses=clauses)
        spoke = False
        convo = list(messages)
        try:
            for rounds_left in range(MAX_TOOL_ROUNDS, -1, -1):
                calls: list[ToolCall] = []
                # aclosing: when the reply is abandoned (barge-in), the request is hung up at once.
                async with aclosing(provider.stream(convo, tools.schemas(device_id) if tools and rounds_left else None)) as items:
                    async for item in items:
                        if isinstance(item, list):
                            calls = item
                            continue
                        for piece in divider.feed(item):
                            if (sentence := shape(piece)).speech:
                                spoke = True
                                yield sentence
                if not calls:
                    break
                exchange = await _run_tools(tools, calls, device_id)
                convo += exchange
                exchanges += exchange
            for piece in divider.flush():
                if (sentence := shape(piece)).speech:
                    spoke = True
                    yield sentence
        except ProviderFailed as exc:
            log.warning("brain: provider %s failed for %s: %s", exc.provider, device_id, exc.reason)
            if exc.network:
                provider.cooldown.failed(exc.reason)
            if spoke:
                raise ProvidersFailed(True, f"{exc.provider}: {exc.reason}") from None
            reasons.append(f"{exc.provider}: {exc.reason}")
            continue
        if spoke:
            return
        log.warning("brain: provider %s failed for %s: nothing speakable", provider.name, device_id)
        reasons.append(f"{provider.name}: nothing speakable")
    del exchanges[mark:]
    raise ProvidersFailed(False, "; ".join(reasons) or "no provider")


async def _run_tools(tools: Toolbox, calls: list[ToolCall], device_id: str) -> list[dict[str, Any]]:
    results = [await tools.call(c.name, c.arguments, device_id) for c in calls]
    log.info("brain: %s: tools %s", device_id, ", ".join(c.name for c in calls))
    return tool_messages(calls, results)


def tool_messages(calls: list[ToolCall], results: list[str]) -> list[dict[str, Any]]:
    """The chat messages of one tool exchange: the assistant's calls, then one result per call."""
    asked = {"role": "assistant", "content": None, "tool_calls": [
        {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}} for c in calls]}
    return [asked, *({"role": "tool", "tool_call_id": c.id, "content": r} for c, r in zip(calls, results))]
