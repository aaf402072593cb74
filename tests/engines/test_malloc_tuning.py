"""tune_malloc keeps big freed buffers out of the resident set: after glibc has served and freed
one large block, its dynamic threshold would serve the next ones from the heap, where a block
below a live allocation is never given back."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

_PATTERN = """
import ctypes, sys
from gateway.engines.malloc_tuning import tune_malloc
if sys.argv[1] == "tuned":
    assert tune_malloc()
libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS"):
            return int(line.split()[1]) / 1024
def touched(size):
    p = libc.malloc(size)
    ctypes.memset(p, 1, size)
    return p
libc.free(touched(24 << 20))            # a model load's big buffer: raises glibc's threshold
before = rss()
blocks = [touched(8 << 20) for _ in range(8)]  # 64 MB of weights-sized blocks
pin = touched(200 << 10)                # something that lives on, above them in the heap
for b in blocks:
    libc.free(b)
print(rss() - before)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc and /proc only")
def test_freed_large_blocks_leave_the_process_once_malloc_is_tuned() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}

    def kept_mb(mode: str) -> float:
        out = subprocess.run([sys.executable, "-c", _PATTERN, mode], env=env, capture_output=True, text=True, check=True)
        return float(out.stdout)

    assert kept_mb("default") > 48  # glibc's dynamic threshold: the 64 MB stay resident
    assert kept_mb("tuned") < 8
