"""A flood of readings over WebSocket with kill -9s of the gateway: every stored reading (devices
database) is exactly one memory (memory database), and every over-threshold one exactly one alert."""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from websockets.exceptions import ConnectionClosed

from firmware_protocol import Hello, ReadingAck, ReadingStatus, SensorReading, Welcome, decode, encode
from gateway.devices.reading_log import readings_after
from gateway.links.device_side import open_device
from gateway.memory.readings import reading_spec
from gateway.memory.store import MemoryStore

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from flood_gateway import RULE, SENSORS  # noqa: E402

T0 = (int(time.time()) // 60 - 60) * 60  # one minute per seq back from here: every reading's text differs


def reading(seq: int) -> SensorReading:
    systolic, diastolic = 100.0 + (seq * 7) % 90, 60.0 + seq % 25  # every few an alert (systolic > 140)
    return SensorReading(seq, "blood_pressure", T0 - 60 * seq, (("systolic", "mmHg", systolic),
                                                                ("diastolic", "mmHg", diastolic)))


@dataclass
class Flood:
    acked: set[tuple[str, int]] = field(default_factory=set)
    unacked: dict[str, set[int]] = field(default_factory=lambda: {s: set() for s in SENSORS})
    next_seq: dict[str, int] = field(default_factory=lambda: {s: 1 for s in SENSORS})
    progress: asyncio.Event = field(default_factory=asyncio.Event)


async def _sensor(url: str, device: str, flood: Flood, window: int = 16) -> None:
    """Send readings with `window` unacked, resending what the last gateway did not ack, until the
    connection dies (the gateway is killed)."""
    try:
        conn = await open_device("ws", url, device)
        await conn.send(encode(Hello(device_id=device)))
        assert isinstance(decode(await conn.recv()), Welcome)
        resend = sorted(flood.unacked[device])
        while True:
            while len(flood.unacked[device]) < window or resend:
                seq = resend.pop(0) if resend else flood.next_seq[device]
                if seq == flood.next_seq[device]:
                    flood.next_seq[device] += 1
                flood.unacked[device].add(seq)
                await conn.send(encode(reading(seq)))
            ack = decode(await conn.recv())
            if isinstance(ack, ReadingAck):
                assert ack.status in (ReadingStatus.STORED, ReadingStatus.DUPLICATE), ack
                flood.unacked[device].discard(ack.seq)
                flood.acked.add((device, ack.seq))
                flood.progress.set()
    except (ConnectionClosed, ConnectionError):
        return
    finally:
        flood.progress.set()


class Gateway:
    """The subprocess, its stdout read all the time (so its log never blocks it)."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc, self.lines, self.new_line = proc, [], asyncio.Event()
        self.reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        while line := await self.proc.stdout.readline():
            self.lines.append(line.decode().rstrip())
            self.new_line.set()

    async def line(self, *parts: str, timeout: float = 120) -> str:
        """The first line of its output containing any of `parts`."""
        async with asyncio.timeout(timeout):
            while True:
                for text in self.lines:
                    if any(part in text for part in parts):
                        return text
                assert not self.reader.done(), "the gateway died:\n" + "\n".join(self.lines[-30:])
                self.new_line.clear()
                await self.new_line.wait()

    async def kill(self) -> None:
        os.kill(self.proc.pid, signal.SIGKILL)
        await self.proc.wait()
        await self.reader


async def _start(folder: Path) -> tuple[Gateway, str]:
    proc = await asyncio.create_subprocess_exec(sys.executable, str(HERE / "flood_gateway.py"), str(folder),
                                                stdout=asyncio.subprocess.PIPE, cwd=HERE.parents[1])
    gw = Gateway(proc)
    port = (await gw.line("ready ")).split()[-1]
    return gw, f"ws://127.0.0.1:{port}/ws"


async def test_a_flood_of_readings_with_kill_9s_leaves_every_reading_one_memory_and_every_high_one_one_alert(
        tmp_path: Path) -> None:
    flood = Flood()
    for round_ in range(3):  # flood, kill -9 mid-flood; the next gateway catches up and floods on
        gw, url = await _start(tmp_path)
        target = len(flood.acked) + 300 + 150 * round_
        sensors = [asyncio.create_task(_sensor(url, device, flood)) for device in SENSORS]
        async with asyncio.timeout(180):
            while len(flood.acked) < target:
                if failed := [t.exception() for t in sensors if t.done() and t.exception()]:
                    raise failed[0]
                assert not all(t.done() for t in sensors), "\n".join(gw.lines[-30:])
                flood.progress.clear()
                await flood.progress.wait()
        await gw.kill()
        await asyncio.gather(*sensors)
    gw, _ = await _start(tmp_path)  # no more readings: it catches up with what the last one left
    # (a hang guard: seconds here, minutes on an emulated Pi, which embeds ~1,500 readings 50x slower)
    await gw.line("memory: caught up with the readings", "memory: readings feed at #", timeout=900)
    await gw.kill()

    conn = sqlite3.connect(tmp_path / "gw.db")
    rows = readings_after(conn, 0, 10**9)
    conn.close()
    assert flood.acked <= {(r.device_id, int(r.measured_at.timestamp() - T0) // -60) for r in rows}
    assert len(rows) >= 300 + 450 + 600
    store = MemoryStore(tmp_path / "memory.db")
    nodes = [(content, tags) for content, tags in store.conn.execute("SELECT content, tags FROM nodes")]
    cursor = store.cursor("readings")
    store.close()
    memories = Counter(c for c, tags in nodes if '"reading:blood_pressure"' in tags and '"kind:event"' in tags)
    expected = Counter(reading_spec(lambda device: "anna", r, 0).content for r in rows)
    assert memories == expected and set(expected.values()) == {1}  # every reading once, nothing else
    alerts = Counter(c for c, tags in nodes if c.startswith("Alert:"))
    high = [r for r in rows if r.values["systolic"] > 140]
    assert alerts == Counter(f"Alert: {RULE} The reading: {reading_spec(lambda d: 'anna', r, 0).content.split(', measured')[0]}."
                             for r in high)
    assert cursor == rows[-1].reading_id
