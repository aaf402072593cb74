"""`gateway memory ...` as a user runs it: add, search, export -> import into a new file, reflect."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

GATEWAY = str(Path(sys.executable).parent / "gateway")


def run(cfg: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess:
    return subprocess.run([GATEWAY, "memory", *args, "--config", str(cfg)], input=stdin, capture_output=True,
                          text=True, timeout=60)


def test_memory_cli_adds_searches_exports_imports_and_reflects(tmp_path: Path) -> None:
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    a.write_text(f"memory:\n  path: {tmp_path / 'a.db'}\n")
    b.write_text(f"memory:\n  path: {tmp_path / 'b.db'}\n")
    assert run(a, "add", "Anna takes her pills at 8", "--kind", "rule", "--persistent", "--user", "anna",
               "--tag", "domain:homecare").returncode == 0
    assert run(a, "add", "The garden needs water", "--user", "anna").returncode == 0
    found = json.loads(run(a, "search", "when are the tablets taken?", "--user", "anna", "-n", "1").stdout)
    assert found[0]["content"] == "Anna takes her pills at 8"
    exported = run(a, "export").stdout
    assert len(exported.splitlines()) == 2
    assert run(b, "import", stdin=exported).returncode == 0
    again = [json.loads(line) for line in run(b, "export", "--user", "anna").stdout.splitlines()]
    assert [(n["content"], n["tags"]) for n in again] == [(json.loads(x)["content"], json.loads(x)["tags"])
                                                          for x in exported.splitlines()]
    reflected = run(a, "reflect", "--user", "anna")
    assert reflected.returncode == 0 and "Portrait of anna" in reflected.stdout
    bad = run(a, "add", "x", "--kind", "gossip")
    assert bad.returncode == 2 and "memory-bad-input: kind must be one of" in bad.stderr
