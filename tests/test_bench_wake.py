"""`gateway bench-wake` on small counts (real models): the figures it prints and returns, and that
they can fail: a cutoff no detection reaches rejects every wake word, a box with the echo check off
interrupts itself and misses the target. The speed itself lives in the benchmark."""

from __future__ import annotations

import pytest

from gateway.cli.bench_wake import PHRASES, bench_echo, bench_wake_word, missed_targets
from gateway.config import GatewayConfig
from gateway.engines.runner import EngineRunner

pytestmark = pytest.mark.models


def _with_listen(cfg: GatewayConfig, **listen) -> GatewayConfig:
    return cfg.model_copy(update={"listen": cfg.listen.model_copy(update=listen)})


def test_the_wake_word_figures_of_a_short_run(cfg: GatewayConfig) -> None:
    lines: list[str] = []
    wake = bench_wake_word(cfg, lines.append, voices=2, sentences=2, noise_s=5.0)
    assert wake["wake_word"] == "okay_nabu" and wake["utterances"] == 2 * 2 * len(PHRASES)
    assert 0 <= wake["false_rejects"] < wake["utterances"]  # okay_nabu hears piper's clean "okay nabu"
    assert sum(sum(v) for v in wake["false_rejects_per_voice"].values()) == wake["false_rejects"]
    assert len(wake["false_rejects_per_voice"]) == 2
    assert wake["false_accepts"] >= 0 and 0.1 < wake["non_wake_minutes"] < 2
    assert wake["cpu_ms_per_device_s"] > 0
    assert lines[0].startswith("wake word okay_nabu (threshold ")
    assert any(line.startswith("false accepts: ") and line.endswith(" per hour") for line in lines)
    assert any(line.startswith("CPU: ") and "ms per device-second" in line for line in lines)


def test_a_cutoff_no_detection_reaches_rejects_every_wake_word(cfg: GatewayConfig) -> None:
    wake = bench_wake_word(_with_listen(cfg, threshold=0.999), lambda _: None, voices=1, sentences=1, noise_s=1.0)
    assert wake["false_rejects"] == wake["utterances"] == 2 * len(PHRASES) and wake["false_accepts"] == 0


async def test_the_echo_figures_and_a_box_without_the_echo_check_misses_the_target(
        cfg: GatewayConfig, runner: EngineRunner) -> None:
    lines: list[str] = []
    echo = await bench_echo(cfg, runner, 1, 1, lines.append)
    assert echo["echoed_replies"] == 1 and echo["barge_ins"] == 1 and 0 <= echo["self_interruptions"] <= 1
    assert set(echo) >= {"missed", "latency_p50_ms", "latency_p95_ms"}
    assert lines[0].startswith("echo: ") and lines[-1].startswith("barge-in over the echo: ")

    deaf = await bench_echo(_with_listen(cfg, echo_check=False), runner, 1, 1, lambda _: None)
    assert deaf["self_interruptions"] == 1  # its own echo stopped the reply
    assert any("self-interruptions" in m for m in missed_targets(deaf))
