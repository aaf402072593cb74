"""The process CPU of `gateway bench-capacity` split by who spent it, from /proc/self/task.

The virtual boxes run in the gateway's process, on its event loop (the main thread): their work
(framing, sending and receiving their audio) is counted in `loop` with the gateway's own Python
work. Everything else is the gateway's alone: the engines' worker threads (named by their pools,
gateway/engines/runner.py: `vad`, `asr`, `tts`) and `other`, the threads onnxruntime starts
for its own intra-op pools (a call on 2 threads runs on its worker and one of these), SQLite's,
and any thread that came and went. Linux only (elsewhere: no split).
"""

from __future__ import annotations

import os
import threading

GROUPS = ("vad", "asr", "tts", "loop", "other")


def _cpu_s(tid: int, tick: float) -> float:
    try:
        with open(f"/proc/self/task/{tid}/stat", encoding="ascii") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:  # the thread ended
        return 0.0
    return (int(fields[11]) + int(fields[12])) / tick


def _group(name: str | None, tid: int) -> str:
    if tid == os.getpid():
        return "loop"
    prefix = (name or "").split("_", 1)[0]
    return prefix if prefix in ("vad", "asr", "tts") else "other"


def thread_cpu() -> dict[int, tuple[str, float]]:
    """Each live thread of this process: (its group, CPU seconds so far)."""
    try:
        tids = [int(t) for t in os.listdir("/proc/self/task")]
    except OSError:
        return {}
    names = {t.native_id: t.name for t in threading.enumerate()}
    tick = float(os.sysconf("SC_CLK_TCK"))
    return {tid: (_group(names.get(tid), tid), _cpu_s(tid, tick)) for tid in tids}


def cpu_by_group(before: dict[int, tuple[str, float]], after: dict[int, tuple[str, float]],
                 total_s: float) -> dict[str, float]:
    """CPU seconds per group between two `thread_cpu` snapshots; `other` also takes what threads
    that ended in between spent (the process total `total_s` less the live threads' share)."""
    spent = dict.fromkeys(GROUPS, 0.0)
    for tid, (group, cpu) in after.items():
        spent[group] += cpu - before.get(tid, (group, 0.0))[1]
    if after:
        spent["other"] += max(0.0, total_s - sum(spent.values()))
    return spent
