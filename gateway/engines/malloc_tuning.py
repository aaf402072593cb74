"""glibc malloc settings that keep the gateway's resident memory near what its models need.

Loading a model allocates and frees large buffers (the parsed protobuf, weights before and
after onnxruntime's graph rewrites). glibc serves a block of 128 KiB or more with its own
mmap and gives it back on free, but every such free also RAISES that threshold to the freed
block's size (up to 32 MiB), so from then on blocks of many MB come from the heap, and a heap
only shrinks from its top: the freed model buffers stay resident for the life of the process.
Measured with `gateway bench --rss` (2-core x86-64): idle 655 MB with the dynamic threshold,
528 MB with a fixed one. A fixed threshold (`mallopt(M_MMAP_THRESHOLD)`, which also switches
the dynamic adjustment off) keeps large blocks on mmap, so they leave when they are freed.
`M_ARENA_MAX` bounds the per-thread heaps (glibc makes up to 8 per core; every engine runs
on its own thread).

The environment wins: with MALLOC_MMAP_THRESHOLD_ / MALLOC_ARENA_MAX set (or on a libc that is
not glibc) this changes nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os

log = logging.getLogger(__name__)

M_ARENA_MAX = -8
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD_BYTES = 256 * 1024
ARENA_MAX = 2


def _mallopt() -> "ctypes._CFuncPtr | None":
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        fn = libc.mallopt
        if not hasattr(libc, "gnu_get_libc_version"):
            return None  # mallopt's parameter numbers are glibc's
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_int]
    fn.restype = ctypes.c_int
    return fn


def tune_malloc(mmap_threshold: int = MMAP_THRESHOLD_BYTES, arena_max: int = ARENA_MAX) -> bool:
    """Fix glibc's mmap threshold and bound its arenas; True when applied. Idempotent."""
    fn = _mallopt()
    if fn is None:
        return False
    done = True
    if "MALLOC_MMAP_THRESHOLD_" not in os.environ:
        done &= fn(M_MMAP_THRESHOLD, mmap_threshold) == 1
    if "MALLOC_ARENA_MAX" not in os.environ:
        done &= fn(M_ARENA_MAX, arena_max) == 1
    if not done:
        log.debug("mallopt refused the memory settings")
    return done
