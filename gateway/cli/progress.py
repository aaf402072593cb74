"""Progress lines of long steps (model preparation, re-embedding), on stderr so stdout stays data."""

from __future__ import annotations

import sys


def progress(line: str) -> None:
    print(f"  {line}", file=sys.stderr, flush=True)
