"""kill -9 during writes, in a loop: every committed node survives, whole, and nothing is half-written."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path

from gateway.memory.store import MemoryStore

HERE = Path(__file__).resolve().parent


async def _write_until_killed(db: Path, round_: int, after: int) -> list[int]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(HERE / "crash_writer.py"), str(db), str(round_),
        stdout=asyncio.subprocess.PIPE, cwd=HERE.parents[1])
    committed: list[int] = []
    async with asyncio.timeout(60):
        while len(committed) < after:
            line = await proc.stdout.readline()
            assert line, "the writer died on its own"
            committed.append(int(line))
    os.kill(proc.pid, signal.SIGKILL)  # mid-write: it is writing the next node right now
    rest, _ = await proc.communicate()
    committed += [int(x) for x in rest.split()]  # printed after commit, before the kill landed
    return committed


async def test_kill_9_in_a_loop_loses_no_committed_node_and_leaves_no_half_node(tmp_path: Path) -> None:
    db = tmp_path / "crash.db"
    committed: list[int] = []
    for round_ in range(4):
        committed += await _write_until_killed(db, round_, after=40 + 17 * round_)
    store = MemoryStore(db)
    conn = store.conn
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    ids = {r[0] for r in conn.execute("SELECT id FROM nodes")}
    assert set(committed) <= ids
    vec_ids = {r[0] for r in conn.execute("SELECT rowid FROM node_vec")}
    assert vec_ids == ids  # every node has its vector, no vector without its node
    for node_id, tags in conn.execute("SELECT id, tags FROM nodes"):
        stored = {r[0] for r in conn.execute("SELECT tag FROM node_tags WHERE node_id = ?", (node_id,))}
        assert stored == set(json.loads(tags))
    store.close()
