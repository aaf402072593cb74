"""How the console saves a file it edits (the reply table, the action rules): whole or not at all,
also across a power cut, one save at a time.

The text goes to a temporary file of its own beside it (`.<name>.<random>.console-tmp`, made by
`tempfile.mkstemp`, so two saves never share one), is flushed to the disk (fsync), then replaces
the file in one rename, and the folder is flushed too (the rename itself is on the disk when
`save_text` returns): the gateway, re-reading the file, sees the old text or the new one, never
a part. Saves into one folder hold an exclusive lock on it (flock) while they write and rename,
so overlapping saves of a file (two console tabs, two processes) take turns. It blocks:
callers run it off the event loop (`asyncio.to_thread`). The file keeps its permission bits.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def _folder_locked(folder: Path) -> Iterator[int]:
    """The folder opened and locked (flock, exclusive) for one save: its descriptor."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield fd  # the lock goes with the descriptor
    finally:
        os.close(fd)


def save_text(path: Path, text: str) -> None:
    with _folder_locked(path.parent) as folder:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".console-tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                out.write(text)
                out.flush()
                with contextlib.suppress(FileNotFoundError):
                    os.fchmod(out.fileno(), path.stat().st_mode & 0o7777)  # mkstemp made it 0600
                os.fsync(out.fileno())
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise
        os.fsync(folder)
