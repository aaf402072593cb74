"""OpenAI-compatible streaming chat, one provider (the only module that imports `openai`)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import openai

from gateway.brain.cooldown import Cooldown
from gateway.config import LlmProviderConfig


class ProviderFailed(Exception):
    """A provider could not answer: `reason` is short and loggable (never contains the key).
    `network`: a timeout, a failed or lost connection, a stall (puts the provider on cool-down)."""

    def __init__(self, provider: str, reason: str, network: bool = False) -> None:
        super().__init__(f"{provider}: {reason}")
        self.provider = provider
        self.reason = reason
        self.network = network


@dataclass(frozen=True)
class ToolCall:
    """A function call the model asked for (arguments: its JSON text, unparsed)."""

    id: str
    name: str
    arguments: str


class LlmProvider:
    def __init__(self, cfg: LlmProviderConfig) -> None:
        self.cfg = cfg
        self.name = cfg.name
        self.cooldown = Cooldown(cfg.name, cfg.cooldown_s)  # skipped for a while after a network failure
        self._client = openai.AsyncOpenAI(
            base_url=cfg.base_url, api_key=cfg.api_key or "none", max_retries=0,
            timeout=openai.Timeout(cfg.total_timeout_s, connect=min(cfg.first_token_timeout_s, 5.0)),
        )

    async def close(self) -> None:
        await self._client.close()

    async def stream(self, messages: list[dict[str, Any]],
                     tools: list[dict[str, Any]] | None = None) -> AsyncIterator[str | list[ToolCall]]:
        """Yield text deltas, and at the end the tool calls asked for (if any).

        Raises ProviderFailed on error, garbage, first-token or total timeout.
        """
        deadline = time.monotonic() + self.cfg.total_timeout_s
        started = stalled = False
        calls: dict[int, list[str]] = {}
        extra: dict[str, Any] = {"tools": tools} if tools else {}
        stream = None
        try:
            async with asyncio.timeout(self.cfg.first_token_timeout_s):
                stream = await self._client.chat.completions.create(
                    model=self.cfg.model, messages=messages, stream=True,  # type: ignore[arg-type]
                    max_tokens=self.cfg.max_tokens, **extra,
                )
                chunks = stream.__aiter__()
                first = await self._next_item(chunks, calls)
            if first is None:
                raise ProviderFailed(self.name, "empty reply")
            started = True
            self.cooldown.answered()
            yield first
            while True:  # each chunk within stall_timeout_s (a pulled network), all within total_timeout_s
                gap = min(self.cfg.stall_timeout_s, deadline - time.monotonic())
                stalled = gap == self.cfg.stall_timeout_s
                async with asyncio.timeout(max(gap, 0.0)):
                    item = await self._next_item(chunks, calls)
                if item is None:
                    break
                yield item
        except TimeoutError:
            raise ProviderFailed(self.name, ("timeout (reply too slow)" if not stalled else
                                             f"stalled (nothing for {self.cfg.stall_timeout_s:g} s)")
                                 if started else "timeout (no first token)", network=stalled or not started) from None
        except openai.APIStatusError as exc:
            raise ProviderFailed(self.name, f"HTTP {exc.status_code}") from None
        except openai.APIConnectionError as exc:
            raise ProviderFailed(self.name, f"connection {'lost' if started else 'failed'}: {type(exc).__name__}",
                                 network=True) from None
        except (openai.OpenAIError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ProviderFailed(self.name, f"bad response: {type(exc).__name__}: {exc}"[:200]) from None
        finally:
            if stream is not None:  # abandoned (a barge-in, a withdrawn early request): hang up now
                await stream.close()

    async def _next_item(self, chunks: AsyncIterator[Any], calls: dict[int, list[str]]) -> str | list[ToolCall] | None:
        """The next non-empty text delta; at the end the collected tool calls; then None."""
        async for chunk in chunks:
            choices = getattr(chunk, "choices", None)
            if not isinstance(choices, list):
                raise ValueError("a chunk without choices")
            if not choices:
                continue
            delta = choices[0].delta
            for tc in delta.tool_calls or []:
                slot = calls.setdefault(tc.index, ["", "", ""])
                slot[0] = tc.id or slot[0]
                if tc.function is not None:
                    slot[1] += tc.function.name or ""
                    slot[2] += tc.function.arguments or ""
            if delta.content:
                return delta.content
        if calls:
            found = [ToolCall(*calls[i]) for i in sorted(calls)]
            calls.clear()
            return found
        return None
