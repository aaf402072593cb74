"""`gateway bench-capacity`'s CPU split by thread: a pool worker's CPU lands in its pool's group."""

from __future__ import annotations

import threading
import time

from gateway.cli.bench_capacity_threads import GROUPS, cpu_by_group, thread_cpu


def _burn(seconds: float, done: threading.Event) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass
    done.wait(30)  # stay alive until the second snapshot


def test_a_tts_worker_and_the_loop_are_counted_apart() -> None:
    done = threading.Event()
    before = thread_cpu()
    worker = threading.Thread(target=_burn, args=(0.3, done), name="tts_0")
    worker.start()
    _burn(0.2, _set(threading.Event()))  # the test runs on the main thread: the loop's group
    while worker.is_alive() and thread_cpu().get(worker.native_id, ("", 0.0))[1] < 0.29:
        time.sleep(0.01)
    after = thread_cpu()
    done.set()
    worker.join()
    spent = cpu_by_group(before, after, total_s=0.0)
    assert set(spent) == set(GROUPS)
    assert spent["tts"] >= 0.28, spent
    assert spent["loop"] >= 0.18, spent
    assert spent["vad"] == spent["asr"] == 0.0, spent


def test_what_ended_threads_spent_goes_to_other() -> None:
    spent = cpu_by_group({}, {1: ("vad", 1.0)}, total_s=1.5)
    assert spent["vad"] == 1.0 and spent["other"] == 0.5


def _set(event: threading.Event) -> threading.Event:
    event.set()
    return event
