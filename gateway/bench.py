"""`gateway bench`: latency and real-time-factor figures for the voice loop, on this machine.

Starts an in-process gateway on a loopback WebSocket, synthesizes N different questions with
the local TTS, streams each in real time through `gateway.simulate` (as a voice box would) and
prints medians and p95 of: VAD cost per window, ASR real-time factor, TTS real-time factor, and
end of speech -> first reply audio byte split into endpoint wait / ASR / brain / first TTS chunk.
Also the resident memory of the idle gateway with every model loaded.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from gateway.app import Gateway, load_runner
from gateway.audio.pcm import int16_to_float
from gateway.config import GatewayConfig
from gateway.links.websocket import WebSocketLink
from gateway.simulate import simulate
from gateway.voice.conversation import TurnMetrics

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


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _stats(values: list[float]) -> dict[str, float]:
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

    tts_rtf: list[float] = []
    inputs = []
    for q in (QUESTIONS * (n // len(QUESTIONS) + 1))[:n]:
        audio, rate, elapsed = _synth(runner, q)
        tts_rtf.append(elapsed / (len(audio) / rate))
        inputs.append((q, audio, rate))

    metrics: list[TurnMetrics] = []
    link = WebSocketLink("127.0.0.1", 0, cfg.server.websocket_path, cfg.server.max_frame_bytes)
    gateway = Gateway(cfg, runner, [link], on_metrics=metrics.append)
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
            say(f"[{i}/{n}] {q!r} -> heard {res.transcript!r}, first audio {res.first_audio_ms:.0f} ms after input end")
    finally:
        server.cancel()
    busy_rss = _rss_mb()
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
        "asr_rtf": _stats([m.asr_ms / m.utterance_ms for m in metrics if m.utterance_ms]),
        "tts_rtf": _stats(tts_rtf),
        "endpoint_wait_ms": _stats([m.endpoint_wait_ms for m in metrics]),
        "asr_after_endpoint_ms": _stats([m.asr_after_endpoint_ms for m in metrics]),
        "asr_compute_ms": _stats([m.asr_ms for m in metrics]),
        "speculative_hits": sum(m.speculative for m in metrics),
        "brain_ms": _stats([m.brain_ms for m in metrics]),
        "first_tts_chunk_ms": _stats([m.first_tts_ms for m in metrics]),
        "endpoint_to_first_audio_ms": _stats([m.endpoint_to_first_audio_ms for m in metrics]),
        "input_end_to_first_audio_ms_client": _stats(first_audio),
    }


def run_bench(cfg: GatewayConfig, utterances: int = 20, as_json: bool = False) -> int:
    def say(line: str) -> None:
        print(f"  {line}", file=sys.stderr, flush=True)

    figures = asyncio.run(_run(cfg, utterances, say))
    if as_json:
        print(json.dumps(figures, indent=2))
        return 0
    print("\nfigure                                   median      p95")
    for key, value in figures.items():
        if isinstance(value, dict) and "median" in value:
            print(f"{key:<38} {value['median']:>9.3f} {value['p95']:>9.3f}")
        else:
            print(f"{key:<38} {value}")
    return 0
