"""`gateway bench --llm`: end of speech -> first reply audio when the LLM answers.

Starts the scripted OpenAI-compatible server (gateway/brain/scripted.py) on 127.0.0.1 with a
fixed first-sentence latency, points a provider at it, and speaks N questions that the local reply
table does not answer through the real VAD -> ASR -> LLM -> TTS path of an in-process gateway.
Prints medians and p95 of endpoint decision -> first reply audio and of the gateway's overhead
(that minus the LLM's own first-sentence latency), split into: ASR still running after the
endpoint, the LLM's first sentence as the brain measured it (from the request), how long after the
endpoint that sentence was there, the first TTS sentence, and the rest (pacing, sending). The
issue's target: overhead <= 200 ms.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from datetime import datetime
from pathlib import Path

from gateway.app import load_runner
from gateway.cli.bench_voice import print_figures, run_turns, stats, synth_inputs
from gateway.brain.scripted import Script, ScriptedLlm
from gateway.config import GatewayConfig, LlmProviderConfig
from gateway.brain.contract import BrainContext
from gateway.brain.local import LocalBrain
from gateway.voice.events import TurnMetrics

TARGET_OVERHEAD_MS = 200.0
# Questions the local reply table has no answer for, so the brain asks the LLM.
LLM_QUESTIONS = [
    "Why is the sky blue?",
    "How far away is the moon?",
    "Tell me a story about a dragon.",
    "What should I cook for dinner tonight?",
    "How do plants make their food?",
    "Can you explain how a rainbow forms?",
    "What is the capital of France?",
    "How many legs does a spider have?",
    "Give me a good name for a cat.",
    "What is the tallest mountain in the world?",
    "How does a bicycle stay upright?",
    "Recommend a book for a long train ride.",
    "What is the boiling point of water?",
    "Why do cats purr?",
    "How long does it take to boil an egg?",
    "Suggest a game for a rainy afternoon.",
    "What makes thunder so loud?",
    "How big is the Pacific Ocean?",
    "Explain gravity in simple words.",
    "What is a black hole?",
]
# The scripted model's reply: its first sentence arrives whole after the first-sentence latency.
REPLY = ("That is a good question. ", "Let me tell you what I know about it. ", "I hope this helps you.")


def llm_config(cfg: GatewayConfig, url: str, workdir: Path) -> GatewayConfig:
    """`cfg` with one provider at `url` (and a throwaway device database)."""
    provider = LlmProviderConfig(name="scripted", base_url=url, model="scripted", first_token_timeout_s=10)
    return cfg.model_copy(update={
        "brain": cfg.brain.model_copy(update={"providers": (provider,)}),
        "devices": cfg.devices.model_copy(update={"database": workdir / "bench.db"}),
    })


def overhead_figures(metrics: list[TurnMetrics], llm_first_ms: float) -> dict:
    """The endpoint -> first audio figures and the gateway's share of them."""
    answered = [m for m in metrics if m.endpoint_to_first_audio_ms]
    overhead = [m.endpoint_to_first_audio_ms - llm_first_ms for m in answered]
    rest = [m.endpoint_to_first_audio_ms - m.first_sentence_after_endpoint_ms - m.first_tts_ms for m in answered]
    median = stats(overhead).get("median")
    return {
        "utterances": len(metrics),
        "answered_with_audio": len(answered),
        "llm_first_sentence_ms_scripted": llm_first_ms,
        "speculative_asr_hits": sum(m.speculative for m in metrics),
        "speculative_reply_hits": sum(m.speculative_reply for m in metrics),
        "endpoint_to_first_audio_ms": stats([m.endpoint_to_first_audio_ms for m in answered]),
        "gateway_overhead_ms": stats(overhead),
        "split_asr_after_endpoint_ms": stats([m.asr_after_endpoint_ms for m in answered]),
        "split_llm_first_sentence_ms": stats([m.brain_ms for m in answered]),
        "split_first_sentence_after_endpoint_ms": stats([m.first_sentence_after_endpoint_ms for m in answered]),
        "split_first_tts_ms": stats([m.first_tts_ms for m in answered]),
        "split_rest_ms": stats(rest),
        "target_overhead_ms": TARGET_OVERHEAD_MS,
        "target_met": median is not None and median <= TARGET_OVERHEAD_MS,
    }


async def measure_llm(cfg: GatewayConfig, runner, n: int, first_sentence_ms: float, say,
                      reply: tuple[str, ...] = REPLY) -> dict:
    """Speak `n` LLM questions to a gateway whose provider is the scripted server; the figures."""
    local = LocalBrain.from_config(cfg)
    now = datetime.now().astimezone()
    for q in LLM_QUESTIONS:  # the reply table must not answer them, or the LLM is never asked
        if local.try_answer(q, BrainContext("bench", now)) is not None:
            raise ValueError(f"the local reply table answers {q!r}: the LLM would not be asked")
    inputs, _ = synth_inputs(runner, LLM_QUESTIONS, n)
    script = Script(list(reply), first_delay_s=first_sentence_ms / 1000, delay_s=0.3)
    with tempfile.TemporaryDirectory(prefix="gateway-bench-") as tmp:
        async with ScriptedLlm([script]) as llm:
            say(f"scripted LLM at {llm.url}: first sentence after {first_sentence_ms:.0f} ms")
            metrics, _ = await run_turns(llm_config(cfg, llm.url, Path(tmp)), runner, inputs, say)
            requests, abandoned = len(llm.requests), len(llm.abandoned)
    figures = overhead_figures(metrics, first_sentence_ms)
    figures["brain_speculate"] = cfg.brain.speculate
    figures["llm_requests"] = requests
    figures["llm_requests_cancelled"] = abandoned  # speculative requests withdrawn (the user went on)
    return figures


async def _run(cfg: GatewayConfig, n: int, first_sentence_ms: float, say) -> dict:
    say("loading models")
    runner = load_runner(cfg, say)
    try:
        return await measure_llm(cfg, runner, n, first_sentence_ms, say)
    finally:
        runner.close()


def run_bench_llm(cfg: GatewayConfig, utterances: int = 20, first_sentence_ms: float = 300.0,
                  as_json: bool = False) -> int:
    def say(line: str) -> None:
        print(f"  {line}", file=sys.stderr, flush=True)

    print_figures(asyncio.run(_run(cfg, utterances, first_sentence_ms, say)), as_json)
    return 0
