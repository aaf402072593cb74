"""`gateway bench` (the voice loop): latency and real-time-factor figures for the voice loop, on this machine.

Starts an in-process gateway on a loopback WebSocket, synthesizes N different questions with
the local TTS, streams each in real time through `gateway.cli.virtual_box` (as a voice box would) and
prints medians and p95 of: VAD cost per window, ASR real-time factor, TTS real-time factor, and
end of speech -> first reply audio byte split into endpoint wait / ASR / brain / first TTS chunk.
Also the resident memory of the idle gateway with every model loaded, and what expression
(visemes, mouth, action, sentiment, servo) costs per sentence next to the TTS.
Then a long memory answer next to the time question (gateway/cli/bench_replies.py).
`gateway bench --llm` (gateway/cli/bench_llm.py) measures the same path with an LLM brain.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from gateway.app import Gateway, load_runner
from gateway.audio.pcm import int16_to_float
from gateway.bus import EventBus
from gateway.config import GatewayConfig
from gateway.expression.bench import measure
from gateway.expression.sentence import Expression
from gateway.expression.servo import ServoMapFile
from gateway.links.websocket import WebSocketLink
from gateway.cli.bench_replies import MEMORY_QUESTION, TIME_QUESTION, long_reply_turns
from gateway.cli.virtual_box import simulate
from gateway.voice.events import TurnFinished, TurnMetrics

QUESTIONS = [
    "What time is it?",
    "Hello there.",
    "What is the date today?",
    "How are you doing today?",
    "Who are you?",
    "Thank you very much.",
    "What can you do for me?",
    "My name is Alice.",
    "Good morning.",
    "What day is it today?",
    "Can you tell me the time please?",
    "What is your name?",
    "Goodbye, see you later.",
    "Hi, how are you?",
    "Tell me the date please.",
    "Thanks a lot for your help.",
    "Help me please.",
    "My name is Robert.",
    "Good evening to you.",
    "What is the weather like outside?",
]


def _rss_mb(pid: int | str = "self") -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def gateway_rss_mb(gateway: Gateway) -> float:
    """The process's VmRSS plus its readings' writer process's (SQLite), in MB."""
    pid = gateway.reading_writer.pid if gateway.reading_writer is not None else None
    return _rss_mb() + (_rss_mb(pid) if pid is not None else 0.0)


def stats(values: list[float]) -> dict[str, float]:
    if not values:
        return {"n": 0}
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))]
    return {"n": len(values), "median": round(statistics.median(values), 4), "p95": round(p95, 4),
            "min": round(ordered[0], 4), "max": round(ordered[-1], 4)}


def _synth(runner, text: str) -> tuple[np.ndarray, int, float]:
    started = time.perf_counter()
    chunks = list(runner.tts.synthesize(text))
    elapsed = time.perf_counter() - started
    audio = np.concatenate([int16_to_float(c.pcm) for c in chunks])
    return audio, chunks[0].sample_rate, elapsed


def synth_inputs(runner, questions: list[str], n: int) -> tuple[list[tuple[str, np.ndarray, int]], list[float]]:
    """`n` spoken questions (cycling through `questions`) and the TTS real-time factor of each."""
    inputs, rtf = [], []
    for q in (questions * (n // len(questions) + 1))[:n]:
        audio, rate, elapsed = _synth(runner, q)
        rtf.append(elapsed / (len(audio) / rate))
        inputs.append((q, audio, rate))
    return inputs, rtf


async def run_turns(cfg: GatewayConfig, runner, inputs: list[tuple[str, np.ndarray, int]], say
                    ) -> tuple[list[TurnMetrics], list[float]]:
    """Each input spoken in real time to an in-process gateway on a loopback WebSocket, one device
    per utterance: the gateway's metrics per turn and the client-side input end -> first audio."""
    link = WebSocketLink("127.0.0.1", 0, cfg.server.websocket_path, cfg.server.max_frame_bytes)
    gateway = Gateway(cfg, runner, [link])
    finished = turn_metrics(gateway.bus)
    ready = asyncio.Event()
    server = asyncio.create_task(gateway.serve(ready))
    await ready.wait()
    url = f"ws://127.0.0.1:{link.port}{cfg.server.websocket_path}"
    first_audio: list[float] = []
    try:
        for i, (q, audio, rate) in enumerate(inputs, 1):
            lead = np.zeros(int(0.3 * rate), np.float32)
            res = await simulate(url, np.concatenate([lead, audio]), rate, device_id=f"bench-{i}")
            if res.first_audio_ms is not None:
                first_audio.append(res.first_audio_ms)
            heard = "no audio" if res.first_audio_ms is None else f"first audio {res.first_audio_ms:.0f} ms after input end"
            say(f"[{i}/{len(inputs)}] {q!r} -> heard {res.transcript!r}, {heard}")
    finally:
        server.cancel()
        await asyncio.gather(server, return_exceptions=True)
    return finished(), first_audio


def turn_metrics(bus: EventBus) -> Callable[[], list[TurnMetrics]]:
    """Subscribe to the turns' metrics (`TurnFinished` on the bus); the call returns those so far."""
    sub = bus.subscribe(TurnFinished, maxsize=100_000, name="bench-metrics")
    metrics: list[TurnMetrics] = []

    def collected() -> list[TurnMetrics]:
        while not sub.queue.empty():
            metrics.append(sub.queue.get_nowait().metrics)
        return metrics

    return collected


def expression_cost(cfg: GatewayConfig, runner) -> dict[str, float]:
    """Expression CPU per sentence next to the TTS (see gateway/expression/bench.py)."""
    e = cfg.expression
    cost = measure(runner.tts, Expression.from_paths(cfg.path(e.action_rules), cfg.path(e.sentiment)),
                   ServoMapFile(cfg.path(e.servo_map)))
    return {"sentences": cost.sentences, "expression_ms_per_sentence": round(1000 * cost.expression_cpu_s / cost.sentences, 3),
            "tts_ms_per_sentence": round(1000 * cost.tts_cpu_s / cost.sentences, 1),
            "expression_share_of_tts_pct": round(100 * cost.ratio, 2)}


async def _run(cfg: GatewayConfig, n: int, say) -> dict:
    say("loading models")
    runner = load_runner(cfg, say)
    idle_rss = _rss_mb()
    say(f"resident memory with all models loaded, idle: {idle_rss:.0f} MB")

    # VAD cost per 32 ms window, on speech.
    speech, rate, _ = _synth(runner, "The quick brown fox jumps over the lazy dog, again and again.")
    from gateway.audio.pcm import resample
    s16 = resample(speech, rate, 16000)
    det = runner.vad.clone()
    w = det.window_samples
    windows = [s16[i : i + w] for i in range(0, len(s16) - w, w)]
    started = time.perf_counter()
    for win in windows:
        det.is_speech(win)
    vad_ms = (time.perf_counter() - started) * 1000 / len(windows)
    clone_ms = []  # each device session clones the VAD (off the event loop, EngineRunner.clone_vad)
    for _ in range(5):
        started = time.perf_counter()
        runner.vad.clone()
        clone_ms.append((time.perf_counter() - started) * 1000)
    expression = expression_cost(cfg, runner)

    inputs, tts_rtf = synth_inputs(runner, QUESTIONS, n)
    metrics, first_audio = await run_turns(cfg, runner, inputs, say)
    busy_rss = _rss_mb()
    long = await long_reply_turns(cfg, runner, lambda q: _synth(runner, q)[:2], max(2, n // 4), say)
    runner.close()
    # Reply TTS RTF, from the engine itself over the replies the gateway gave.
    for m in metrics:
        if m.reply:
            audio, rate, elapsed = _synth(runner, m.reply)
            tts_rtf.append(elapsed / (len(audio) / rate))
    return {
        "utterances": len(metrics),
        "idle_rss_mb": round(idle_rss, 1),
        "rss_after_all_utterances_mb": round(busy_rss, 1),
        "vad_ms_per_32ms_window": round(vad_ms, 4),
        "vad_clone_ms": stats(clone_ms),
        "asr_rtf": stats([m.asr_ms / m.utterance_ms for m in metrics if m.utterance_ms]),
        "tts_rtf": stats(tts_rtf),
        "endpoint_wait_ms": stats([m.endpoint_wait_ms for m in metrics]),
        "asr_after_endpoint_ms": stats([m.asr_after_endpoint_ms for m in metrics]),
        "asr_compute_ms": stats([m.asr_ms for m in metrics]),
        "speculative_hits": sum(m.speculative for m in metrics),
        "brain_ms": stats([m.brain_ms for m in metrics]),
        "first_tts_chunk_ms": stats([m.first_tts_ms for m in metrics]),
        "first_piece_prepared": sum(m.first_tts_prepared for m in metrics),  # synthesized during the endpoint wait
        "endpoint_to_first_audio_ms": stats([m.endpoint_to_first_audio_ms for m in metrics]),
        "input_end_to_first_audio_ms_client": stats(first_audio),
        **{f"{key}_endpoint_to_first_audio_ms": stats([m.endpoint_to_first_audio_ms for m in long[q]])
           for key, q in (("memory_answer", MEMORY_QUESTION), ("time_question", TIME_QUESTION))},
        "memory_answer_first_tts_ms": stats([m.first_tts_ms for m in long[MEMORY_QUESTION]]),
        "memory_answer_brain_ms": stats([m.brain_ms for m in long[MEMORY_QUESTION]]),
        "memory_answer_first_piece_prepared": sum(m.first_tts_prepared for m in long[MEMORY_QUESTION]),
        **expression,
    }


def print_figures(figures: dict, as_json: bool) -> None:
    if as_json:
        print(json.dumps(figures, indent=2))
        return
    print("\nfigure                                   median      p95")
    for key, value in figures.items():
        if isinstance(value, dict) and "median" in value:
            print(f"{key:<38} {value['median']:>9.3f} {value['p95']:>9.3f}")
        else:
            print(f"{key:<38} {value}")


def run_bench(cfg: GatewayConfig, utterances: int = 20, as_json: bool = False) -> int:
    def say(line: str) -> None:
        print(f"  {line}", file=sys.stderr, flush=True)

    print_figures(asyncio.run(_run(cfg, utterances, say)), as_json)
    return 0
