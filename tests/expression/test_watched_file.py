"""WatchedFile sees a file replaced atomically (as the console saves) even with the same size and
modification time: the inode changed."""

from __future__ import annotations

import os

from gateway.expression.watched import WatchedFile


def test_a_file_replaced_with_the_same_size_and_mtime_is_read_again(tmp_path) -> None:
    path = tmp_path / "table.csv"
    path.write_text("code-a\n", encoding="utf-8")
    watched = WatchedFile(path, str.strip, "")
    assert watched.get() == "code-a"
    stamp = path.stat().st_mtime_ns
    new = tmp_path / ".table.csv.tmp"
    new.write_text("code-b\n", encoding="utf-8")  # same size
    os.utime(new, ns=(stamp, stamp))  # same modification time
    os.replace(new, path)
    assert path.stat().st_mtime_ns == stamp and watched.get() == "code-b"
    assert watched.get() == "code-b" and watched.reloads == 2
