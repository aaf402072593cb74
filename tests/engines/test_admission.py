"""Engine pools: admission to the workers (deadline order, a bounded line, refusals logged) and the
runner's pools running calls side by side. Ordering and events only, no timing."""

from __future__ import annotations

import asyncio
import logging
import threading

import numpy as np
import pytest

from gateway.engines.admission import Admission
from gateway.engines.fake import FakeAsr, FakeTts, FakeVad
from gateway.engines.runner import EngineRunner, pool_size
from gateway.errors import EngineBusy

@pytest.mark.asyncio(loop_scope="session")
async def test_when_the_workers_are_busy_the_earliest_deadline_goes_first_and_the_wait_is_logged(caplog) -> None:
    admission = Admission("tts", workers=1)
    order: list[str] = []
    hold = asyncio.Event()

    async def call(name: str, deadline: float | None) -> None:
        async with admission.slot(name, deadline):
            order.append(name)
            if name == "first":
                await hold.wait()

    caplog.set_level(logging.INFO, "gateway.engines.admission")
    first = asyncio.create_task(call("first", None))
    await asyncio.sleep(0)
    later = [asyncio.create_task(call(name, d)) for name, d in (("box-a later sentence", 1e12), ("box-b first", 0.0))]
    while admission.queued < 2:
        await asyncio.sleep(0)
    hold.set()
    await asyncio.gather(first, *later)
    assert order == ["first", "box-b first", "box-a later sentence"]
    assert "tts: all 1 workers busy: box-b first waits (2 waiting)" in caplog.text
    assert admission.waited == 2 and admission.busy == 0


@pytest.mark.asyncio(loop_scope="session")
async def test_a_turn_beyond_the_waiting_line_is_refused_with_engine_busy_and_a_log_line(caplog) -> None:
    admission = Admission("asr", workers=1, max_waiting=1)
    hold = asyncio.Event()

    async def call(name: str) -> None:
        async with admission.slot(name):
            await hold.wait()

    running, waiting = asyncio.create_task(call("box-1")), asyncio.create_task(call("box-2"))
    while admission.queued < 1:
        await asyncio.sleep(0)
    with pytest.raises(EngineBusy) as refused:
        await call("box-3")
    assert refused.value.code == "engine-busy" and admission.refused == 1
    assert "asr: all 1 workers busy and 1 calls waiting: box-3 refused" in caplog.text
    hold.set()
    await asyncio.gather(running, waiting)  # the admitted ones still run


@pytest.mark.asyncio(loop_scope="session")
async def test_a_cancelled_waiter_gives_its_turn_to_the_next() -> None:
    admission = Admission("asr", workers=1)
    hold, ran = asyncio.Event(), []

    async def call(name: str) -> None:
        async with admission.slot(name):
            ran.append(name)
            await hold.wait()

    first = asyncio.create_task(call("a"))
    second, third = asyncio.create_task(call("b")), asyncio.create_task(call("c"))
    while admission.queued < 2:
        await asyncio.sleep(0)
    second.cancel()
    hold.set()
    await asyncio.gather(first, third)
    assert ran == ["a", "c"] and admission.busy == 0


class MeetingAsr(FakeAsr):
    """Each transcription waits (in its worker thread) until `parties` of them run at the same time."""

    def __init__(self, parties: int) -> None:
        self.met = threading.Barrier(parties, timeout=10)

    def transcribe(self, audio: np.ndarray, cancel: threading.Event | None = None) -> str:
        self.met.wait()  # BrokenBarrierError if the calls ran one after the other
        return "met"


class LoneAsr(MeetingAsr):
    thread_safe = False


@pytest.mark.asyncio(loop_scope="session")
async def test_two_boxes_decode_side_by_side_on_a_pool_of_two() -> None:
    runner = EngineRunner(FakeVad(), MeetingAsr(2), FakeTts(), asr_workers=2, tts_workers=2)
    try:
        heard = await asyncio.gather(*(runner.transcribe(np.zeros(1600, np.float32), who=f"box-{i}") for i in range(2)))
    finally:
        runner.close()
    assert heard == ["met", "met"] and runner.asr_admission.waited == 0


def test_an_engine_that_cannot_be_shared_gets_one_worker_and_zero_means_one_per_core(caplog) -> None:
    caplog.set_level(logging.INFO, "gateway.engines.runner")
    assert pool_size("asr", LoneAsr(2), 4) == 1
    assert "asr: LoneAsr takes one call at a time: 1 worker" in caplog.text
    assert pool_size("tts", FakeTts(), 3) == 3
    assert pool_size("tts", FakeTts(), 0) >= 1


class BlockedAsr(FakeAsr):
    def __init__(self) -> None:
        self.entered, self.go = threading.Event(), threading.Event()

    def transcribe(self, audio: np.ndarray, cancel: threading.Event | None = None) -> str:
        self.entered.set()
        self.go.wait(10)
        return "done"


@pytest.mark.asyncio(loop_scope="session")
async def test_a_cancelled_decode_returns_at_once_but_keeps_its_worker_until_its_thread_is_done() -> None:
    asr = BlockedAsr()
    runner = EngineRunner(FakeVad(), asr, FakeTts(), asr_workers=1)
    try:
        decode = asyncio.create_task(runner.transcribe(np.zeros(1600, np.float32), who="box-1"))
        await asyncio.wait_for(asyncio.to_thread(asr.entered.wait, 10), 15)
        decode.cancel()
        with pytest.raises(asyncio.CancelledError):
            await decode
        assert runner.asr_admission.busy == 1  # the thread still decodes: nobody else gets its core
        asr.go.set()

        async def idle() -> None:
            while runner.asr_admission.busy:
                await asyncio.sleep(0.01)

        await asyncio.wait_for(idle(), 10)
    finally:
        runner.close()
