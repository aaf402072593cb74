"""Where the LLM brain keeps its conversation histories besides RAM: the interface of the shared
store (PostgreSQL: gateway/storage/history.py), and `HistorySync`, which writes to it in order.

Without a store (the single box, `storage.backend: sqlite`) the history stays in the gateway's
RAM only, as before. With one, the brain saves each turn when it starts and when its reply ends
(and again when `spoken()` corrects it to what was played), forgets a withdrawn one, and reads the person's turns
back before each new turn, so a conversation continues on another gateway after a failover.
The writes are queued (the brain's `spoken()` is synchronous) and run one after the other; a read
waits for this gateway's queued writes first. A failing store is logged and the RAM history used.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Protocol

from gateway.brain.history import Turn

log = logging.getLogger(__name__)


class HistoryStore(Protocol):
    async def load(self, key: str) -> list[Turn]:
        """The turns of `key` (a brain history key: "user:<person>" or "device:<id>"), oldest first."""
        ...

    async def save(self, key: str, turn: Turn, budget_tokens: int) -> None:
        """Insert or update `turn` (by its id); then drop the oldest turns of `key` beyond the budget."""
        ...

    async def delete(self, key: str, turn_id: str) -> None: ...


class HistorySync:
    """The brain's writes to a HistoryStore, in the order they were asked, off the caller's path."""

    def __init__(self, store: HistoryStore, budget_tokens: int) -> None:
        self._store = store
        self._budget = budget_tokens
        self._last: asyncio.Task[None] | None = None

    def save(self, key: str, turn: Turn) -> None:
        copy = Turn(turn.user, turn.reply, list(turn.tools), turn.id)  # as it is now
        self._then(lambda: self._store.save(key, copy, self._budget), f"turn of {key} not saved")

    def delete(self, key: str, turn_id: str) -> None:
        self._then(lambda: self._store.delete(key, turn_id), f"withdrawn turn of {key} not deleted")

    async def load(self, key: str) -> list[Turn] | None:
        """The stored turns, after this gateway's own writes; None when the store failed (logged)."""
        await self.flush()
        try:
            return await self._store.load(key)
        except Exception as exc:  # noqa: BLE001 - any store failure: the turn goes on with the RAM history
            log.warning("brain: the shared history of %s not read (%s); this gateway's own is used", key,
                        " ".join(str(exc).split()) or type(exc).__name__)
            return None

    async def flush(self) -> None:
        if self._last is not None:
            await asyncio.wait([self._last])  # (never raises, also not when that write was cancelled)

    def _then(self, write: Callable[[], Awaitable[None]], failed: str) -> None:
        self._last = asyncio.get_running_loop().create_task(self._after(self._last, write, failed),
                                                            name="history-write")

    @staticmethod
    async def _after(previous: asyncio.Task[None] | None, write: Callable[[], Awaitable[None]], failed: str) -> None:
        if previous is not None:
            await asyncio.wait([previous])  # in order; each write catches its own failure
        try:
            await write()
        except Exception as exc:  # noqa: BLE001 - logged; the RAM history is unaffected
            log.warning("brain: %s (%s)", failed, " ".join(str(exc).split()) or type(exc).__name__)
