"""`gateway bench --xiaozhi` runs end to end (fake engines, 2 questions) and prints its figures;
the speed itself lives in the benchmark."""

from __future__ import annotations

from gateway.cli.bench_voice import print_figures
from gateway.cli.bench_xiaozhi import measure_xiaozhi


async def test_the_xiaozhi_bench_interleaves_a_box_and_the_own_protocol_and_prints_latency_opus_cpu_and_concurrency(
        fake_cfg, fake_runner, capsys) -> None:
    lines: list[str] = []
    figures = await measure_xiaozhi(fake_cfg, fake_runner, 2, lines.append, boxes=(1, 2))
    assert figures["xiaozhi_replied"] == 2 and figures["own_replied"] == 2, lines
    assert figures["xiaozhi_v1_first_frame_ms"]["n"] == 1 and figures["xiaozhi_v3_first_frame_ms"]["n"] == 1
    for kind in ("xiaozhi", "own"):  # each turn's gateway metrics (from the bus) split its latency
        assert figures[f"split_gateway_endpoint_to_first_audio_ms_{kind}"]["n"] == 2
        assert figures[f"split_speech_end_to_endpoint_plus_delivery_ms_{kind}"]["n"] == 2
    assert figures["opus_mic_audio_decoded_s"] > 0 and figures["opus_reply_audio_encoded_s"] > 0
    assert figures["opus_both_ways_cpu_pct_of_core"] is not None
    assert figures["boxes_2_first_frame_ms"]["n"] == 2 and figures["boxes_2_within_deadline"].endswith("/2")
    print_figures(figures, as_json=False)
    out = capsys.readouterr().out
    for figure in ("load_average_at_start", "xiaozhi_first_frame_ms", "own_first_audio_ms", "xiaozhi_minus_own_median_ms", "protocol_cost_xiaozhi_minus_own_median_ms",
                   "opus_decode_cpu_pct_of_core", "opus_encode_cpu_pct_of_core", "boxes_2_p95_over_1_box"):
        assert figure in out
