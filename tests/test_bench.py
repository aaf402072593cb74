"""`gateway bench` paths run (briefly) and print their figures; the speed itself lives in the benchmark."""

from __future__ import annotations

import pytest

from gateway.cli.bench_voice import expression_cost, print_figures
from gateway.cli.bench_llm import measure_llm

pytestmark = pytest.mark.models


async def test_the_llm_bench_speaks_questions_through_asr_to_the_scripted_llm_and_prints_the_overhead_split(
        cfg, runner, capsys) -> None:
    figures = await measure_llm(cfg, runner, 2, 300.0, lambda line: None, reply=("A short answer.",))
    assert figures["utterances"] == 2 and figures["answered_with_audio"] == 2
    assert figures["llm_requests"] >= 2  # the scripted server was asked for each question
    print_figures(figures, as_json=False)
    out = capsys.readouterr().out
    for figure in ("endpoint_to_first_audio_ms", "gateway_overhead_ms", "split_asr_after_endpoint_ms",
                   "split_llm_first_sentence_ms", "split_first_tts_ms", "split_rest_ms", "target_met"):
        assert figure in out
    assert figures["split_llm_first_sentence_ms"]["median"] >= 300  # the LLM's own latency is measured, not assumed


def test_the_bench_prints_what_expression_costs_per_sentence_next_to_the_tts(cfg, runner, capsys) -> None:
    cost = expression_cost(cfg, runner)
    assert cost["sentences"] > 0 and cost["tts_ms_per_sentence"] > 0 and cost["expression_ms_per_sentence"] > 0
    print_figures(cost, as_json=True)
    assert '"expression_share_of_tts_pct"' in capsys.readouterr().out
