"""`gateway bench`, long replies: end of speech -> first reply audio for a long memory answer and for
the time question, side by side in one run.

A gateway with a memory (in a temporary folder: the user's data is not touched) gets a blood-
pressure reading from a virtual cuff of user `bench`, as `gateway run` would; virtual boxes of the
same user then ask "What was my blood pressure this morning?" (answered from memory in one long
sentence) and "What time is it?" (one short sentence) in turn, spoken by the local TTS in real
time. Figures per question: the gateway's endpoint -> first audio, the first sentence's words.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from datetime import datetime
from pathlib import Path

import numpy as np

from firmware_protocol import Hello, ReadingAck, SensorReading, Welcome, decode, encode
from gateway.app import Gateway
from gateway.cli.virtual_box import simulate
from gateway.config import GatewayConfig
from gateway.links.device_side import open_device
from gateway.links.websocket import WebSocketLink
from gateway.memory.service import MemoryService
from gateway.memory.nodes import Node
from gateway.voice.events import TurnFinished, TurnMetrics

MEMORY_QUESTION = "What was my blood pressure this morning?"
TIME_QUESTION = "What time is it?"
CUFF = "bench-cuff"
USER = "bench"


def _this_morning() -> int:
    """A time this morning (7:45 today), or a minute ago before then."""
    now = datetime.now().astimezone()
    morning = now.replace(hour=7, minute=45, second=0, microsecond=0)
    return int(morning.timestamp() if morning < now else time.time() - 60)


async def _store_reading(url: str, gateway: Gateway) -> None:
    remembered = gateway.bus.subscribe(Node, name="bench-remembered")
    try:
        cuff = await open_device("ws", url, CUFF)
        async with cuff:
            await cuff.send(encode(Hello(device_id=CUFF)))
            assert isinstance(decode(await asyncio.wait_for(cuff.recv(), 15)), Welcome)
            values = (("systolic", "mmHg", 128.0), ("diastolic", "mmHg", 82.0), ("pulse", "bpm", 64.0))
            await cuff.send(encode(SensorReading(1, "blood_pressure", _this_morning(), values)))
            while not isinstance(decode(await asyncio.wait_for(cuff.recv(), 15)), ReadingAck):
                pass
        await asyncio.wait_for(remembered.get(), 60)  # the memory has it
    finally:
        remembered.close()


async def long_reply_turns(cfg: GatewayConfig, runner, synth, rounds: int, say) -> dict[str, list[TurnMetrics]]:
    """`rounds` turns of each question: their metrics by question. `synth(text)` -> (audio, rate)."""
    boxes = {f"bench-long-{i}": USER for i in range(2 * rounds)}
    with tempfile.TemporaryDirectory(prefix="gateway-bench-") as tmp:
        cfg = cfg.model_copy(update={
            "memory": cfg.memory.model_copy(update={"enabled": True, "path": Path(tmp) / "memory.db",
                                                    "users": {CUFF: USER, **boxes}}),
            "devices": cfg.devices.model_copy(update={"database": Path(tmp) / "devices.db", "open_enrolment": True}),
        })
        say("long replies: loading the memory")
        memory = MemoryService.from_config(cfg, progress=say)
        link = WebSocketLink("127.0.0.1", 0, cfg.server.websocket_path, cfg.server.max_frame_bytes)
        gateway = Gateway(cfg, runner, [link], memory=memory)
        finished = gateway.bus.subscribe(TurnFinished, maxsize=10_000, name="bench-long")
        ready = asyncio.Event()
        server = asyncio.create_task(gateway.serve(ready))
        await ready.wait()
        url = f"ws://127.0.0.1:{link.port}{cfg.server.websocket_path}"
        spoken = {q: synth(q) for q in (MEMORY_QUESTION, TIME_QUESTION)}
        by_question: dict[str, list[TurnMetrics]] = {MEMORY_QUESTION: [], TIME_QUESTION: []}
        try:
            await _store_reading(url, gateway)
            for i, box in enumerate(boxes):
                question = (MEMORY_QUESTION, TIME_QUESTION)[i % 2]
                audio, rate = spoken[question]
                res = await simulate(url, np.concatenate([np.zeros(int(0.3 * rate), np.float32), audio]), rate,
                                     device_id=box)
                m = (await asyncio.wait_for(finished.get(), 30)).metrics
                by_question[question].append(m)
                say(f"[{i + 1}/{len(boxes)}] {question!r} -> {res.sentences[:1]!r}, "
                    f"endpoint -> first audio {m.endpoint_to_first_audio_ms:.0f} ms (asr after endpoint "
                    f"{m.asr_after_endpoint_ms:.0f}, brain {m.brain_ms:.0f}, first TTS {m.first_tts_ms:.0f} ms"
                    f"{', prepared' if m.first_tts_prepared else ''})")
        finally:
            finished.close()
            server.cancel()
            await asyncio.gather(server, return_exceptions=True)
    return by_question
