"""The days the once-per-cluster jobs have run, on PostgreSQL: the memory scheduler's RunLog
(gateway/memory/run_log.py) when several gateways share the database.

One row per (job, day) in `job_runs`; `first` inserts it and says whether it was new, so of
two members asking at once (a failover) exactly one runs the job. Rows older than `KEEP_DAYS`
are deleted as new ones come (a few rows per user and day).
"""

from __future__ import annotations

from psycopg_pool import AsyncConnectionPool

KEEP_DAYS = 35


class PostgresRunLog:
    def __init__(self, pool: AsyncConnectionPool) -> None:
        self._pool = pool

    async def first(self, job: str, day: str) -> bool:
        async with self._pool.connection() as conn:
            row = await (await conn.execute(
                "WITH old AS (DELETE FROM job_runs WHERE ran_at < now() - make_interval(days => %s))"
                " INSERT INTO job_runs (job, day) VALUES (%s, %s) ON CONFLICT DO NOTHING RETURNING 1",
                (KEEP_DAYS, job, day))).fetchone()
        return row is not None
