"""The console's file saves (gateway/console/file_save.py) are whole, durable and take turns:
overlapping saves of one file never fail or leave a mix, a reader sees one version or the other,
the new text and the rename are flushed to the disk, and the file keeps its permissions."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import pytest

from gateway.console import file_save
from gateway.console.file_save import save_text

PAIRS = 200


def test_overlapping_saves_of_one_file_all_succeed_and_leave_one_whole_version(tmp_path: Path) -> None:
    target = tmp_path / "replies.yaml"
    a, b = "intents: []\n# A\n" + "a" * 300_000 + "\n", "intents: []\n# B\n" + "b" * 100_000 + "\n"
    target.write_text(a)
    failures: list[BaseException] = []
    seen: set[int] = set()
    stop = threading.Event()

    def read() -> None:
        while not stop.is_set():
            text = target.read_text()
            if text not in (a, b):
                seen.add(len(text))

    def save(text: str, start: threading.Barrier) -> None:
        start.wait()
        try:
            save_text(target, text)
        except BaseException as exc:  # noqa: BLE001 - collected for the assertion
            failures.append(exc)

    reader = threading.Thread(target=read)
    reader.start()
    finals = set()
    try:
        for _ in range(PAIRS):  # two saves started together, as two console tabs may
            start = threading.Barrier(2)
            savers = [threading.Thread(target=save, args=(text, start)) for text in (a, b)]
            for t in savers:
                t.start()
            for t in savers:
                t.join(60)
            finals.add(target.read_text() in (a, b))
    finally:
        stop.set()
        reader.join(60)
    assert failures == [] and finals == {True} and seen == set()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["replies.yaml"]  # no temporary file left


def test_the_text_and_the_rename_reach_the_disk_and_the_mode_stays(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "action_rules.csv"
    target.write_text("old\n")
    target.chmod(0o640)
    synced: list[tuple[str, str]] = []  # (what was flushed, what the file held then)
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        real_fsync(fd)
        what = os.readlink(f"/proc/self/fd/{fd}")
        synced.append((what, target.read_text()))

    monkeypatch.setattr(file_save.os, "fsync", fsync)
    save_text(target, "new\n")
    assert target.read_text() == "new\n" and stat.S_IMODE(target.stat().st_mode) == 0o640
    [(temporary, before), (folder, after)] = synced
    assert Path(temporary).parent == tmp_path and temporary.endswith(".console-tmp") and before == "old\n"
    assert Path(folder) == tmp_path and after == "new\n"  # the folder flushed after the rename
