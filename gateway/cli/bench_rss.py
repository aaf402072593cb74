"""`gateway bench --rss`: the resident memory of the gateway `gateway run` serves, on this machine.

Builds what `gateway run` builds (every engine through `load_runner`, the memory service with
its embedding model, the default links on free loopback ports), with the databases in a
temporary folder, and prints VmRSS (and Pss from /proc/self/smaps_rollup) after each engine
loads, once idle with every model warm, and after N sessions of the virtual voice box (short
questions spoken by the TTS, one device per session, some of them remembered by the memory).
Also the per-stage compute of those sessions (ASR, first TTS sentence, VAD window, embedding),
the figures the README's Raspberry Pi estimate multiplies. RSS is exact; times are wall-clock
medians and as noisy as the machine is busy.
"""

from __future__ import annotations

import asyncio
import json
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from gateway.app import Gateway, load_runner
from gateway.app_links import default_links
from gateway.audio.pcm import int16_to_float, resample
from gateway.cli.bench_voice import turn_metrics
from gateway.cli.virtual_box import simulate
from gateway.config import GatewayConfig

QUESTIONS = [
    "What time is it?", "My name is Alice.", "What is my name?", "Hello there.",
    "What is the date today?", "Thank you very much.", "Who are you?", "Good morning.",
    "What day is it today?", "Goodbye, see you later.",
]


def memory_mb(pid: int | str = "self") -> dict[str, float]:
    """VmRSS and VmHWM (/proc/PID/status) and Pss (/proc/PID/smaps_rollup), in MB."""
    out: dict[str, float] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key.lower()] = round(int(rest.split()[0]) / 1024, 1)
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                out["pss"] = round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return out


def _free_port(kind: int) -> int:
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def bench_config(cfg: GatewayConfig, folder: Path) -> GatewayConfig:
    """`cfg` on loopback, on free ports, with its databases in `folder` and memory on."""
    up = {
        "server": cfg.server.model_copy(update={"host": "127.0.0.1", "websocket_port": 0}),
        "screens": cfg.screens.model_copy(update={"host": "127.0.0.1", "port": 0}),
        "mqtt": cfg.mqtt.model_copy(update={"port": _free_port(socket.SOCK_STREAM)}),
        "coap": cfg.coap.model_copy(update={"port": _free_port(socket.SOCK_DGRAM)}),
        "devices": cfg.devices.model_copy(update={"database": folder / "gateway.db"}),
        "memory": cfg.memory.model_copy(update={"enabled": True, "path": folder / "memory.db"}),
    }
    return cfg.model_copy(update=up)


def _median(values: list[float]) -> float | None:
    return round(statistics.median(values), 2) if values else None


def _spoken(runner, text: str) -> tuple[np.ndarray, int, float]:
    started = time.perf_counter()
    chunks = list(runner.tts.synthesize(text))
    return np.concatenate([int16_to_float(c.pcm) for c in chunks]), chunks[0].sample_rate, time.perf_counter() - started


async def _sessions(cfg: GatewayConfig, runner, n: int, speed: float, say) -> dict:
    from gateway.memory.service import MemoryService

    figures: dict = {}
    before = memory_mb()
    memory = MemoryService.from_config(cfg)
    links = default_links(cfg)
    gateway = Gateway(cfg, runner, links, memory=memory)
    finished = turn_metrics(gateway.bus)
    ready = asyncio.Event()
    server = asyncio.create_task(gateway.serve(ready))
    try:
        await ready.wait()
        embed_ms = []
        for text in QUESTIONS * 2:  # warm the embedder, and time it
            started = time.perf_counter()
            await memory.embed([text])
            embed_ms.append(1000 * (time.perf_counter() - started))
        figures["embedding_ms"] = _median(embed_ms[len(QUESTIONS):])
        idle = memory_mb()
        figures["load_rss_delta_mb"] = {"memory_service": round(idle["vmrss"] - before["vmrss"], 1)}
        figures["idle"] = idle
        figures["idle_with_writer"] = _with_writer(gateway, idle)
        say(f"idle, every model warm, memory service on: {idle}; with the readings' writer process: "
            f"{figures['idle_with_writer']}")
        inputs = [_spoken(runner, q)[:2] for q in QUESTIONS]
        url = f"ws://127.0.0.1:{links[0].port}{cfg.server.websocket_path}"
        heard = 0
        for i in range(n):
            audio, rate = inputs[i % len(inputs)]
            lead = np.zeros(int(0.3 * rate), np.float32)
            res = await simulate(url, np.concatenate([lead, audio]), rate, device_id=f"rss-{i}", speed=speed)
            heard += res.first_audio_ms is not None
            if (i + 1) % 10 == 0:
                say(f"{i + 1}/{n} sessions: {memory_mb()}")
        figures["sessions"] = n
        figures["sessions_with_reply"] = heard
        figures["after_sessions"] = memory_mb()
        figures["after_sessions_with_writer"] = _with_writer(gateway, figures["after_sessions"])
    finally:
        server.cancel()
        await asyncio.gather(server, return_exceptions=True)
    metrics = finished()
    figures["asr_ms"] = _median([m.asr_ms for m in metrics])
    figures["utterance_ms"] = _median([m.utterance_ms for m in metrics])
    figures["first_tts_sentence_ms"] = _median([m.first_tts_ms for m in metrics])
    return figures


def _with_writer(gateway: Gateway, own: dict[str, float]) -> dict[str, float]:
    """The gateway's memory plus its readings' writer process's (SQLite; it is counted in the
    targets): VmRSS and Pss summed, VmHWM the gateway's."""
    pid = gateway.reading_writer.pid if gateway.reading_writer is not None else None
    if pid is None:
        return dict(own)
    writer = memory_mb(pid)
    return {key: round(value + writer.get(key, 0.0), 1) if key != "vmhwm" else value for key, value in own.items()} | \
        {"writer_vmrss": writer["vmrss"], "writer_pss": writer.get("pss", 0.0)}


def _vad_ms(runner) -> float:
    speech, rate, _ = _spoken(runner, "The quick brown fox jumps over the lazy dog, again and again.")
    s16, det = resample(speech, rate, 16000), runner.vad.clone()
    w = det.window_samples
    windows = [s16[i:i + w] for i in range(0, len(s16) - w, w)]
    started = time.perf_counter()
    for win in windows:
        det.is_speech(win)
    return round((time.perf_counter() - started) * 1000 / len(windows), 4)


def measure_rss(cfg: GatewayConfig, sessions: int = 50, speed: float = 2.0, say=lambda line: None) -> dict:
    figures: dict = {"start": memory_mb()}
    deltas: dict[str, float] = {}
    last = [figures["start"]["vmrss"]]

    def progress(line: str) -> None:
        say(line)
        if line.startswith("loaded "):  # "loaded vad in 0.1 s" from load_engines
            now = memory_mb()["vmrss"]
            deltas[line.split()[1]] = round(now - last[0], 1)
            last[0] = now

    runner = load_runner(cfg, progress)
    deltas["warm_up"] = round(memory_mb()["vmrss"] - last[0], 1)
    figures["engines_warm"] = memory_mb()
    tts_rtf = []
    for q in QUESTIONS:
        audio, rate, seconds = _spoken(runner, q)
        tts_rtf.append(seconds / (len(audio) / rate))
    figures["tts_rtf"] = round(statistics.median(tts_rtf), 4)
    figures["vad_ms_per_32ms_window"] = _vad_ms(runner)
    try:
        with tempfile.TemporaryDirectory(prefix="bench-rss-") as folder:
            more = asyncio.run(_sessions(bench_config(cfg, Path(folder)), runner, sessions, speed, say))
    finally:
        runner.close()
    deltas.update(more.pop("load_rss_delta_mb"))
    figures["load_rss_delta_mb"] = deltas
    figures.update(more)
    figures["targets"] = {"idle_rss_mb<=400": figures["idle_with_writer"]["vmrss"] <= 400,
                          f"rss_after_{sessions}_sessions_mb<=500":
                          figures["after_sessions_with_writer"]["vmrss"] <= 500}
    return figures


def run_bench_rss(cfg: GatewayConfig, sessions: int = 50, speed: float = 2.0, as_json: bool = False) -> int:
    def say(line: str) -> None:
        print(f"  {line}", file=sys.stderr, flush=True)

    figures = measure_rss(cfg, sessions, speed, say)
    if as_json:
        print(json.dumps(figures, indent=2))
    else:
        for key, value in figures.items():
            print(f"{key:<26} {value}")
    return 0
