"""gateway bench --rss on the real models: it builds the gateway, serves sessions of the virtual
box and reports resident memory idle and after them, per engine, with the targets."""

from __future__ import annotations

import pytest

from gateway.cli.bench_rss import measure_rss
from gateway.config import GatewayConfig

pytestmark = pytest.mark.models


def test_the_rss_bench_serves_every_session_and_reports_memory_per_stage(prepared_cfg: GatewayConfig) -> None:
    figures = measure_rss(prepared_cfg, sessions=2, speed=4.0)
    assert figures["sessions"] == figures["sessions_with_reply"] == 2
    assert set(figures["load_rss_delta_mb"]) >= {"vad", "asr", "tts", "memory_service"}
    for stage in ("start", "engines_warm", "idle", "after_sessions"):
        assert figures[stage]["vmrss"] > 0 and figures[stage]["vmhwm"] >= figures[stage]["vmrss"]
    deltas = figures["load_rss_delta_mb"]
    assert deltas["asr"] > 20 and deltas["tts"] > 20 and deltas["memory_service"] > 5  # models of tens of MB
    assert set(figures["targets"]) == {"idle_rss_mb<=400", "rss_after_2_sessions_mb<=500"}
