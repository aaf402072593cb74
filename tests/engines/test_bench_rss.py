"""gateway bench --rss on the real models: it builds the gateway, serves sessions of the virtual
box and reports resident memory idle and after them, per engine, with the targets.

It runs as the user runs it, `gateway bench --rss` in a process of its own: the memory each engine
adds is only meaningful in a process that has not loaded models before (inside a long test run the
ASR's delta once came out under its weights' size)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from gateway.config import GatewayConfig

pytestmark = pytest.mark.models

REPO = Path(__file__).resolve().parents[2]


def test_the_rss_bench_serves_every_session_and_reports_memory_per_stage(prepared_cfg: GatewayConfig,
                                                                         tmp_path: Path) -> None:
    config = tmp_path / "gateway.yaml"  # relative paths are the config file's: the shipped config/ beside it
    (tmp_path / "config").symlink_to(REPO / "config", target_is_directory=True)
    config.write_text(yaml.safe_dump({"models": {"dir": str(prepared_cfg.models.dir),
                                                 "manifest": str(prepared_cfg.models.manifest)}}))
    done = subprocess.run([sys.executable, "-m", "gateway", "bench", "--config", str(config), "--rss",
                           "--sessions", "2", "--speed", "4", "--json"],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    figures = json.loads(done.stdout)
    assert figures["sessions"] == figures["sessions_with_reply"] == 2
    assert set(figures["load_rss_delta_mb"]) >= {"vad", "asr", "tts", "memory_service"}
    for stage in ("start", "engines_warm", "idle", "after_sessions"):
        assert figures[stage]["vmrss"] > 0 and figures[stage]["vmhwm"] >= figures[stage]["vmrss"]
    deltas = figures["load_rss_delta_mb"]
    assert deltas["asr"] > 20 and deltas["tts"] > 20 and deltas["memory_service"] > 5  # models of tens of MB
    assert set(figures["targets"]) == {"idle_rss_mb<=400", "rss_after_2_sessions_mb<=500"}
