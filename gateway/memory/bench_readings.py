"""`gateway bench-memory --readings N`: sensor readings per second into the memory.

Method (printed with the figures), on a throw-away devices database and memory (real MiniLM):
- catch-up: N readings of 4 sensors (blood pressure, every 7th above a 140/90 rule, and
  temperature) already stored, turned into memories by the readings feed (gateway/memory/
  reading_feed.py: batches of 256, one embedding call and one transaction each, the rule
  evaluated on every reading): readings/s and CPU per reading;
- live: a gateway (fake voice engines, real memory) on an in-memory link, 4 sensors sending N
  readings in all as fast as they are acked (16 in flight each): acked readings/s, and how long
  after the last ack the memory held them all;
- for comparison: MiniLM embedding whole reading sentences, batched (what a memory that embeds
  each reading's text could take at most).
The load average is printed with the figures: the machine may be shared.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from firmware_protocol import Capability, Hello, ReadingAck, SensorReading, Welcome
from gateway.devices.database import Database
from gateway.devices.reading_log import ReadingLog
from gateway.devices.readings import insert_reading
from gateway.memory.reading_feed import ReadingFeed
from gateway.memory.readings import describe_reading
from gateway.memory.rules import RuleEngine
from gateway.memory.service import MemoryService

SENSORS = ("bp-1", "bp-2", "temp-1", "temp-2")
RULE_TAGS = ["reading:blood_pressure", "above:140/90"]


def _reading(device: str, seq: int, now: float) -> SensorReading:
    measured = int(now) - 60 * seq
    if device.startswith("bp"):
        return SensorReading(seq, "blood_pressure", measured, (("systolic", "mmHg", 150.0 if seq % 7 == 0 else 120.0),
                                                               ("diastolic", "mmHg", 80.0)))
    return SensorReading(seq, "temperature", measured, (("celsius", "°C", 20.0 + seq % 50 / 10),))


def _store_all(conn: Any, n: int, now: float) -> None:
    conn.execute("BEGIN")
    for i in range(n):
        insert_reading(conn, SENSORS[i % 4], _reading(SENSORS[i % 4], i // 4 + 1, now), now)
    conn.execute("COMMIT")


RULE = "Blood pressure above 140/90: please rest."


async def _memory(folder: Path, embedder_factory: Any) -> MemoryService:
    memory = MemoryService(folder / "memory.db", embedder_factory, users={s: "anna" for s in SENSORS})
    await memory.start()
    await memory.remember("anna", RULE, kind="rule", persistent=True, extra_tags=RULE_TAGS)
    return memory


async def catch_up(folder: Path, embedder_factory: Any, n: int) -> dict[str, float]:
    db = Database(folder / "catchup.db")
    await db.run(_store_all, n, time.time())
    memory = await _memory(folder / "catchup", embedder_factory)
    feed = ReadingFeed(memory, ReadingLog(db), RuleEngine(memory, lambda alert: None, lambda user: ()))
    await feed.feed_once()  # the first batch warms the embedder and the caches
    wall, cpu = time.perf_counter(), time.process_time()
    while await feed.feed_once():
        pass
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    done = feed.remembered - min(n, feed.batch)
    await memory.close()
    db.close()
    return {"readings": done, "per_s": round(done / wall, 1), "cpu_ms_per_reading": round(cpu / done * 1000, 3),
            "alerts": feed.alerts}


async def live(folder: Path, embedder_factory: Any, n: int) -> dict[str, float]:
    from gateway.app import Gateway
    from gateway.config import parse_config
    from gateway.engines.fake import FakeAsr, FakeTts, FakeVad
    from gateway.engines.runner import EngineRunner
    from gateway.links.memory import MemoryLink

    rule = {"user": "anna", "text": RULE, "reading": "blood_pressure", "above": "140/90"}
    cfg = parse_config({"devices": {"database": str(folder / "live.db"), "max_readings_per_minute": 0},
                        "memory": {"users": {s: "anna" for s in SENSORS}, "rules": [rule]}}, Path.cwd())
    memory = MemoryService(folder / "live.memory.db", embedder_factory, users=cfg.memory.users)
    link, runner = MemoryLink(), EngineRunner(FakeVad(), FakeAsr(), FakeTts())
    gateway = Gateway(cfg, runner, [link], memory=memory)
    ready = asyncio.Event()
    task = asyncio.create_task(gateway.serve(ready))
    await asyncio.wait_for(ready.wait(), 60)
    now = time.time()

    async def sensor(device: str, count: int) -> None:
        dev = link.connect()
        await dev.send(Hello(device_id=device, capabilities=Capability(0)))  # a sensor: alerts are not said on it
        while not isinstance(await dev.receive(), Welcome):
            pass
        sent = acked = 0
        while acked < count:
            while sent < count and sent - acked < 16:
                sent += 1
                await dev.send(_reading(device, sent, now))
            if isinstance(await dev.receive(), ReadingAck):
                acked += 1

    start = time.perf_counter()
    await asyncio.gather(*(sensor(s, n // 4) for s in SENSORS))
    acked_s = time.perf_counter() - start
    last = await ReadingLog(gateway.db).last_id()
    async with asyncio.timeout(600):
        while (await memory.cursor("readings") or 0) < last:
            await gateway.reading_feed.caught_up.wait()
    all_in_s = time.perf_counter() - start
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    runner.close()
    total = n // 4 * 4
    return {"readings": total, "acked_per_s": round(total / acked_s, 1), "memory_per_s": round(total / all_in_s, 1),
            "memory_lag_s": round(all_in_s - acked_s, 2), "alerts": gateway.reading_feed.alerts}


def full_text_embedding(embedder: Any, n: int = 256) -> float:
    """Readings/s if each reading's whole sentence were embedded (batches of 64)."""
    texts = [f"{describe_reading('blood_pressure', {'systolic': 100 + i % 90, 'diastolic': 70}, {'systolic': 'mmHg'})}, "
             f"measured {datetime.fromtimestamp(1.8e9 + 60 * i, UTC):%Y-%m-%d %H:%M} by bp-{i % 4}" for i in range(n)]
    embedder.embed(texts[:8])
    start = time.perf_counter()
    for i in range(0, n, 64):
        embedder.embed(texts[i:i + 64])
    return round(n / (time.perf_counter() - start), 1)


def run_bench_readings(cfg: Any, n: int, as_json: bool = False) -> int:
    from gateway.engines.minilm_embed import MiniLmEmbedder
    from gateway.engines.store import ModelStore

    logging.getLogger("gateway").setLevel(logging.ERROR)  # not a line per alert (none can be said here)
    store = ModelStore(cfg)
    embedder = MiniLmEmbedder.from_store(store)
    out = (lambda line: None) if as_json else print
    results: dict[str, Any] = {"load_average_before": os.getloadavg()}
    with tempfile.TemporaryDirectory(prefix="readings-bench-") as tmp:
        out(f"readings -> memory, {n} readings of 4 sensors (load average {os.getloadavg()[0]:.1f}, "
            f"{os.cpu_count()} cores)")
        results["catch_up"] = asyncio.run(catch_up(Path(tmp), lambda: embedder, n))
        c = results["catch_up"]
        out(f"  catch-up (stored readings -> memories): {c['per_s']} readings/s, {c['cpu_ms_per_reading']} ms CPU "
            f"each, {c['alerts']} alerts")
        results["live"] = asyncio.run(live(Path(tmp), lambda: embedder, n))
        v = results["live"]
        out(f"  live (4 sensors on an in-memory link): {v['acked_per_s']} readings/s acked, {v['memory_per_s']} "
            f"readings/s into memory, all in memory {v['memory_lag_s']} s after the last ack, {v['alerts']} alerts")
    results["full_text_embedding_per_s"] = full_text_embedding(embedder)
    out(f"  for comparison, MiniLM on whole reading sentences: {results['full_text_embedding_per_s']} readings/s at most")
    results["load_average_after"] = os.getloadavg()
    out(f"  load average after: {results['load_average_after'][0]:.1f}")
    if as_json:
        print(json.dumps(results, indent=2))
    return 0

