"""Which daily jobs have run: the memory scheduler asks before it runs one, so each runs once per day.

`first(job, day)` is True exactly once per (job, day) and records it. In RAM (`RunLogInMemory`)
on one gateway, as before (a restart after a job's time runs it again that day); on PostgreSQL
(`PostgresRunLog`, gateway/storage/job_runs.py) for a cluster, so the member that takes the
scheduler over after a failover does not run again what the old holder ran today. A job is
recorded before it runs: one cut off mid-way is not repeated that day (at most once).
"""

from __future__ import annotations

from typing import Protocol


class RunLog(Protocol):
    async def first(self, job: str, day: str) -> bool:
        """True (and recorded) when `job` has not run for `day` yet, else False."""
        ...


class RunLogInMemory:
    def __init__(self) -> None:
        self._done: set[tuple[str, str]] = set()

    async def first(self, job: str, day: str) -> bool:
        if (job, day) in self._done:
            return False
        self._done.add((job, day))
        return True
