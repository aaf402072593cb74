"""OpenAI-compatible streaming chat, one provider (the only module that imports `openai`)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import openai

from gateway.config import LlmProviderConfig


class ProviderFailed(Exception):
    """A provider could not answer: `reason` is short and loggable (never contains the key)."""

    def __init__(self, provider: str, reason: str) -> None:
        super().__init__(f"{provider}: {reason}")
        self.provider = provider
        self.reason = reason


class LlmProvider:
    def __init__(self, cfg: LlmProviderConfig) -> None:
        self.cfg = cfg
        self.name = cfg.name
        self._client = openai.AsyncOpenAI(
            base_url=cfg.base_url, api_key=cfg.api_key or "none", max_retries=0,
            timeout=openai.Timeout(cfg.total_timeout_s, connect=min(cfg.first_token_timeout_s, 5.0)),
        )

    async def close(self) -> None:
        await self._client.close()

    async def stream(self, messages: list[dict[str, str]]) -> AsyncIterator[str]:
        """Yield text deltas. Raises ProviderFailed on error, garbage, first-token or total timeout."""
        deadline = time.monotonic() + self.cfg.total_timeout_s
        started = False
        try:
            async with asyncio.timeout(self.cfg.first_token_timeout_s):
                stream = await self._client.chat.completions.create(
                    model=self.cfg.model, messages=messages, stream=True,  # type: ignore[arg-type]
                    max_tokens=self.cfg.max_tokens,
                )
                chunks = stream.__aiter__()
                first = await self._next_text(chunks)
            if first is None:
                raise ProviderFailed(self.name, "empty reply")
            started = True
            yield first
            async with asyncio.timeout_at(asyncio.get_running_loop().time() + deadline - time.monotonic()):
                while (text := await self._next_text(chunks)) is not None:
                    yield text
        except TimeoutError:
            raise ProviderFailed(self.name, "timeout (reply too slow)" if started else "timeout (no first token)") from None
        except openai.APIStatusError as exc:
            raise ProviderFailed(self.name, f"HTTP {exc.status_code}") from None
        except openai.APIConnectionError as exc:
            raise ProviderFailed(self.name, f"connection failed: {type(exc).__name__}") from None
        except (openai.OpenAIError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ProviderFailed(self.name, f"bad response: {type(exc).__name__}: {exc}"[:200]) from None

    async def _next_text(self, chunks: AsyncIterator[object]) -> str | None:
        """The next non-empty text delta, or None at the end of the stream."""
        async for chunk in chunks:
            choices = getattr(chunk, "choices", None)
            if not isinstance(choices, list):
                raise ValueError("a chunk without choices")
            if choices and (text := choices[0].delta.content):
                return text
        return None
