"""`gateway bench --xiaozhi`: a xiaozhi box over its WebSocket with Opus next to the gateway's own
protocol, on the same in-process gateway (the real models, loopback), in one interleaved run.

The N questions are synthesized by the local TTS (as `gateway bench`), their trailing silence cut
at the last speech sample, with 0.3 s of lead-in. Each is spoken in real time, once by a xiaozhi
box (gateway/cli/xiaozhi_box.py: 60 ms Opus packets of 16 kHz, protocol v1 and v3 on alternate
questions, `auto` listen mode: the gateway's VAD ends the utterance) and once by the virtual box
on the gateway's own protocol (gateway/cli/virtual_box.py: 20 ms PCM chunks), the order swapped
on every question so that neither always goes first. Printed (medians and p95):

* end of speech (the last speech sample sent) -> first Opus reply frame on the box, and -> first
  reply audio on the virtual box; their difference, per question and of the medians (target:
  xiaozhi within 30 ms of the own protocol);
* its split, per protocol, from the turn's metrics (`TurnFinished` on the bus): the gateway's
  endpoint decision -> first audio handed to the link (VAD, ASR, brain, TTS: the compute, the
  same for both protocols and what makes the figures noisy on a busy machine), and the rest,
  end of speech -> endpoint decision + delivery to the box (the endpointer's silence wait, which
  60 ms packets round up, the Opus encode, framing and the socket): what the protocol costs;
* the Opus CPU of the box sessions on the gateway: the thread CPU time in libopus's decode
  (microphone) and encode (reply) calls per second of audio coded, in % of one core (target
  <= 2%; both ways = a full-duplex second, as in the realtime mode);
* concurrent boxes: N boxes (`--boxes`, default 1 2 4) speaking at once, the p95 against N = 1's
  and how many turns met the deadline (the own protocol's p95 + 30 ms).

The machine's load average is printed with the figures: they are only comparable at the same load.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

from gateway.app import Gateway, load_runner
from gateway.audio.opus import OpusMeter
from gateway.audio.pcm import resample
from gateway.bus import EventBus
from gateway.cli.bench_voice import QUESTIONS, print_figures, stats, synth_inputs
from gateway.cli.virtual_box import SimulateError, simulate
from gateway.cli.xiaozhi_box import BoxError, PacedBox
from gateway.config import GatewayConfig
from gateway.links.websocket import WebSocketLink
from gateway.links.xiaozhi.emotions import EmotionTable
from gateway.links.xiaozhi.endpoint import XiaozhiEndpoint
from gateway.links.xiaozhi.identity import device_id_of
from gateway.voice.events import TurnFinished, TurnMetrics

TARGET_DIFF_MS = 30.0
TARGET_OPUS_PCT = 2.0
LEAD_S = 0.3


def spoken_part(audio: np.ndarray, rate: int) -> np.ndarray:
    """Lead-in silence + the audio up to its last speech sample (above 1% of the peak)."""
    loud = np.flatnonzero(np.abs(audio) > 0.01 * float(np.max(np.abs(audio)) or 1.0))
    end = int(loud[-1]) + 1 if loud.size else len(audio)
    return np.concatenate([np.zeros(int(LEAD_S * rate), np.float32), audio[:end]])


def _bench_cfg(cfg: GatewayConfig, folder: Path) -> GatewayConfig:
    """A throw-away device database with open enrolment: the boxes enrol by OTA, nothing stays
    (all from this machine's address: its new-box limits do not apply to them)."""
    devices = cfg.devices.model_copy(update={"database": folder / "gateway.db", "open_enrolment": True})
    xiaozhi = cfg.xiaozhi.model_copy(update={"enrolments_per_hour_per_address": 100_000, "max_enrolled_boxes": 1_000_000})
    return cfg.model_copy(update={"devices": devices, "xiaozhi": xiaozhi})


def _diff(a: dict, b: dict, key: str) -> float | None:
    return round(a[key] - b[key], 1) if key in a and key in b else None


class _Bench:
    def __init__(self, url: str, ota: str, bus: EventBus, say) -> None:
        self.url, self.ota, self.say = url, ota, say
        self._turns = bus.subscribe(TurnFinished, maxsize=100_000, name="bench-xiaozhi")
        self._others: list[TurnFinished] = []  # other devices' turns, seen while waiting for one

    async def metrics(self, device_id: str, timeout: float = 10.0) -> TurnMetrics | None:
        """The gateway's metrics of `device_id`'s next turn (published just after its reply ended)."""
        for event in self._others:
            if event.device_id == device_id:
                self._others.remove(event)
                return event.metrics
        try:
            async with asyncio.timeout(timeout):
                while (event := await self._turns.queue.get()).device_id != device_id:
                    self._others.append(event)
        except TimeoutError:
            return None
        return event.metrics

    async def box(self, mac: str, version: int) -> PacedBox:
        box = PacedBox(mac=mac, version=version)
        await box.boot(self.ota)
        return box

    async def xiaozhi(self, box: PacedBox, speech16k: np.ndarray, label: str) -> float | None:
        try:
            turn = await box.turn(speech16k)
        except BoxError as exc:
            self.say(f"{label} xiaozhi v{box.version}: {exc}")
            return None
        heard = "no audio" if turn.first_frame_ms is None else f"first Opus frame {turn.first_frame_ms:.0f} ms"
        self.say(f"{label} xiaozhi v{box.version}: heard {turn.transcript!r}, {heard}")
        return turn.first_frame_ms

    async def own(self, audio: np.ndarray, rate: int, device_id: str, label: str) -> float | None:
        try:
            res = await simulate(self.url, audio, rate, device_id=device_id)
        except SimulateError as exc:
            self.say(f"{label} own protocol: {exc}")
            return None
        heard = "no audio" if res.first_audio_ms is None else f"first audio {res.first_audio_ms:.0f} ms"
        self.say(f"{label} own protocol: heard {res.transcript!r}, {heard}")
        return res.first_audio_ms


async def measure_xiaozhi(cfg: GatewayConfig, runner, n: int, say, boxes: tuple[int, ...] = (1, 2, 4)) -> dict:
    """The figures (see the module docstring) on `runner`'s engines."""
    load_start = os.getloadavg()
    inputs, _ = synth_inputs(runner, QUESTIONS, n)
    spoken = [(q, spoken_part(audio, rate), rate) for q, audio, rate in inputs]
    meter = OpusMeter()
    with tempfile.TemporaryDirectory(prefix="bench-xiaozhi-") as folder:
        cfg = _bench_cfg(cfg, Path(folder))
        s, x = cfg.server, cfg.xiaozhi
        endpoint = XiaozhiEndpoint.from_config(x, EmotionTable.load(cfg.path(x.emotions)), s.max_frame_bytes)
        endpoint.opus_meter = meter
        link = WebSocketLink("127.0.0.1", 0, s.websocket_path, s.max_frame_bytes, [endpoint])
        gateway = Gateway(cfg, runner, [link])
        ready = asyncio.Event()
        server = asyncio.create_task(gateway.serve(ready))
        try:
            await asyncio.wait_for(ready.wait(), 30)
            bench = _Bench(f"ws://127.0.0.1:{link.port}{s.websocket_path}", f"http://127.0.0.1:{link.port}{x.ota_path}",
                           gateway.bus, say)
            figures = await _interleaved(bench, spoken, say)
            figures.update(_opus_figures(meter))
            deadline = figures["own_first_audio_ms"].get("p95", 0.0) + TARGET_DIFF_MS
            figures.update(await _concurrent(bench, spoken, boxes, figures.pop("_xiaozhi_values"), deadline, say))
        finally:
            server.cancel()
            await asyncio.gather(server, return_exceptions=True)
    load_end = os.getloadavg()
    return {"load_average_at_start": [round(v, 2) for v in load_start],
            "load_average_at_end": [round(v, 2) for v in load_end], **figures}


async def _interleaved(bench: _Bench, spoken, say) -> dict:
    """Each question by a xiaozhi box (v1 on even, v3 on odd questions) and by the virtual box."""
    boxes = {1: await bench.box("a0:b1:c2:be:00:01", 1), 3: await bench.box("a0:b1:c2:be:00:03", 3)}
    xz: dict[int, list[float]] = {1: [], 3: []}
    own: list[float] = []
    paired: list[float] = []
    compute: dict[str, list[float]] = {"xiaozhi": [], "own": []}  # gateway: endpoint -> first audio to the link
    rest: dict[str, list[float]] = {"xiaozhi": [], "own": []}  # end of speech -> endpoint + delivery

    async def split(kind: str, device_id: str, client_ms: float | None) -> None:
        m = await bench.metrics(device_id) if client_ms is not None else None
        if m is not None and m.endpoint_to_first_audio_ms:
            compute[kind].append(m.endpoint_to_first_audio_ms)
            rest[kind].append(client_ms - m.endpoint_to_first_audio_ms)

    for i, (q, audio, rate) in enumerate(spoken):
        label = f"[{i + 1}/{len(spoken)}] {q!r}"
        version = 1 if i % 2 == 0 else 3
        box, own_id = boxes[version], f"bench-{i + 1}"
        speech16k = resample(audio, rate, 16000)
        for kind in ("xiaozhi", "own") if i % 2 == 0 else ("own", "xiaozhi"):
            if kind == "xiaozhi":
                a = await bench.xiaozhi(box, speech16k, label)
                await split(kind, device_id_of(box.mac) or "", a)
            else:
                b = await bench.own(audio, rate, own_id, label)
                await split(kind, own_id, b)
        if a is not None:
            xz[version].append(a)
        if b is not None:
            own.append(b)
        if a is not None and b is not None:
            paired.append(a - b)
    all_xz = xz[1] + xz[3]
    x_stats, o_stats = stats(all_xz), stats(own)
    diff_median = _diff(x_stats, o_stats, "median")
    rest_x, rest_o = stats(rest["xiaozhi"]), stats(rest["own"])
    return {
        "utterances": len(spoken),
        "xiaozhi_replied": len(all_xz),
        "own_replied": len(own),
        "xiaozhi_first_frame_ms": x_stats,
        "xiaozhi_v1_first_frame_ms": stats(xz[1]),
        "xiaozhi_v3_first_frame_ms": stats(xz[3]),
        "own_first_audio_ms": o_stats,
        "xiaozhi_minus_own_per_utterance_ms": stats(paired),
        "xiaozhi_minus_own_median_ms": diff_median,
        "xiaozhi_minus_own_p95_ms": _diff(x_stats, o_stats, "p95"),
        "xiaozhi_over_own_median_ratio": round(x_stats["median"] / o_stats["median"], 3) if diff_median is not None and o_stats["median"] else None,
        "target_within_30ms_met": diff_median is not None and diff_median <= TARGET_DIFF_MS,
        "split_gateway_endpoint_to_first_audio_ms_xiaozhi": stats(compute["xiaozhi"]),
        "split_gateway_endpoint_to_first_audio_ms_own": stats(compute["own"]),
        "split_speech_end_to_endpoint_plus_delivery_ms_xiaozhi": rest_x,
        "split_speech_end_to_endpoint_plus_delivery_ms_own": rest_o,
        "protocol_cost_xiaozhi_minus_own_median_ms": _diff(rest_x, rest_o, "median"),
        "_xiaozhi_values": all_xz,
    }


def _opus_figures(meter: OpusMeter) -> dict:
    decode = 100 * meter.decode_cpu_s / meter.decoded_s if meter.decoded_s else None
    encode = 100 * meter.encode_cpu_s / meter.encoded_s if meter.encoded_s else None
    both = decode + encode if decode is not None and encode is not None else None
    return {"opus_mic_audio_decoded_s": round(meter.decoded_s, 1), "opus_reply_audio_encoded_s": round(meter.encoded_s, 1),
            "opus_decode_cpu_pct_of_core": None if decode is None else round(decode, 3),
            "opus_encode_cpu_pct_of_core": None if encode is None else round(encode, 3),
            "opus_both_ways_cpu_pct_of_core": None if both is None else round(both, 3),
            "opus_target_2pct_met": both is not None and both <= TARGET_OPUS_PCT}


async def _concurrent(bench: _Bench, spoken, counts: tuple[int, ...], single: list[float], deadline: float, say) -> dict:
    """N boxes speaking at once (rounds of N different questions); N = 1 is the interleaved run's."""
    figures: dict = {"deadline_ms": round(deadline, 1)}
    base = stats(single)
    for n in counts:
        if n == 1:
            values = single
        else:
            boxes = [await bench.box(f"a0:b1:c2:cc:{n:02x}:{k:02x}", 1 if k % 2 == 0 else 3) for k in range(n)]
            values = []
            for r in range(max(1, len(spoken) // n)):
                round_inputs = [spoken[(r * n + k) % len(spoken)] for k in range(n)]
                say(f"{n} boxes at once, round {r + 1}: " + ", ".join(repr(q) for q, _, _ in round_inputs))
                results = await asyncio.gather(*(bench.xiaozhi(box, resample(a, rate, 16000), f"  box {k + 1}")
                                                 for k, (box, (_, a, rate)) in enumerate(zip(boxes, round_inputs))))
                values += [v for v in results if v is not None]
        st = stats(values)
        figures[f"boxes_{n}_first_frame_ms"] = st
        figures[f"boxes_{n}_p95_over_1_box"] = round(st["p95"] / base["p95"], 3) if st.get("p95") and base.get("p95") else None
        figures[f"boxes_{n}_within_deadline"] = f"{sum(v <= deadline for v in values)}/{len(values)}"
    return figures


def run_bench_xiaozhi(cfg: GatewayConfig, utterances: int = 20, boxes: tuple[int, ...] = (1, 2, 4),
                      as_json: bool = False) -> int:
    def say(line: str) -> None:
        print(f"  {line}", file=sys.stderr, flush=True)

    say("loading models")
    runner = load_runner(cfg, say)
    try:
        figures = asyncio.run(measure_xiaozhi(cfg, runner, utterances, say, boxes))
    finally:
        runner.close()
    print_figures(figures, as_json)
    return 0
