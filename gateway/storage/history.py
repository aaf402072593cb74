"""The LLM brain's conversation history on PostgreSQL: the HistoryStore (gateway/brain/history_store.py)
several gateways share, so a person's conversation continues on whichever gateway serves them.

One row per turn in `conversation_turns`, keyed by the brain's history key and the turn's id, in
insertion order (`seq`). Each save trims the key's oldest rows beyond the token budget with the
same rule as the RAM history (`gateway.brain.history.kept`), so the table holds per person no more
than one gateway would keep in RAM.
"""

from __future__ import annotations

import json
import time

from psycopg_pool import AsyncConnectionPool

from gateway.brain.history import Turn, kept


class PostgresHistoryStore:
    def __init__(self, pool: AsyncConnectionPool) -> None:
        self._pool = pool

    async def load(self, key: str) -> list[Turn]:
        async with self._pool.connection() as conn:
            rows = await (await conn.execute(
                "SELECT turn_id, user_text, reply, tools FROM conversation_turns WHERE history_key = %s ORDER BY seq",
                (key,))).fetchall()
        return [Turn(user, reply, json.loads(tools), turn_id) for turn_id, user, reply, tools in rows]

    async def save(self, key: str, turn: Turn, budget_tokens: int) -> None:
        async with self._pool.connection() as conn, conn.transaction():
            await conn.execute(
                "INSERT INTO conversation_turns (history_key, turn_id, user_text, reply, tools, updated_at)"
                " VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (history_key, turn_id) DO UPDATE"
                " SET reply = excluded.reply, tools = excluded.tools, updated_at = excluded.updated_at",
                (key, turn.id, turn.user, turn.reply, json.dumps(turn.tools, ensure_ascii=False), time.time()))
            rows = await (await conn.execute(
                "SELECT seq, turn_id, user_text, reply, tools FROM conversation_turns WHERE history_key = %s"
                " ORDER BY seq", (key,))).fetchall()
            turns = [Turn(user, reply, json.loads(tools), turn_id) for _, turn_id, user, reply, tools in rows]
            dropped = len(turns) - len(kept(turns, budget_tokens))
            if dropped:
                await conn.execute("DELETE FROM conversation_turns WHERE history_key = %s AND seq <= %s",
                                   (key, rows[dropped - 1][0]))

    async def delete(self, key: str, turn_id: str) -> None:
        async with self._pool.connection() as conn:
            await conn.execute("DELETE FROM conversation_turns WHERE history_key = %s AND turn_id = %s", (key, turn_id))
