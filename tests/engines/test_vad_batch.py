"""VadBatcher: every box's waiting VAD windows in one call; a single box waits for nothing."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from gateway.engines.vad_batch import BatchVad, VadBatcher


class _Detector:
    """A detector whose decision is whether the window's first sample is positive."""

    sample_rate = 16000
    window_samples = 512

    def __init__(self) -> None:
        self.seen = 0

    def is_speech(self, window: np.ndarray) -> bool:
        return bool(window[0] > 0)

    def reset(self) -> None: ...

    def clone(self) -> "_Detector":
        return _Detector()


class _Engine(_Detector):
    def __init__(self, fail: bool = False) -> None:
        super().__init__()
        self.calls: list[int] = []  # requests per decide_many call
        self.fail = fail

    def decide_many(self, requests):  # noqa: ANN001, ANN201 (the BatchVad protocol's signature)
        self.calls.append(len(requests))
        if self.fail:
            raise RuntimeError("the model failed")
        out = []
        for detector, windows in requests:
            detector.seen += len(windows)
            out.append([detector.is_speech(w) for w in windows])
        return out


def _w(value: float) -> np.ndarray:
    return np.full(512, value, np.float32)


@pytest.fixture
def pool():
    with ThreadPoolExecutor(2) as p:
        yield p


def test_the_engine_is_a_batch_vad() -> None:
    assert isinstance(_Engine(), BatchVad)
    assert not isinstance(_Detector(), BatchVad)


async def test_a_single_box_is_decided_without_waiting_for_others(pool) -> None:
    engine = _Engine()
    batcher = VadBatcher(engine, pool, gather_s=3600.0)  # a wait would never end within the timeout
    detector = engine.clone()
    for _ in range(3):
        assert await asyncio.wait_for(batcher.decide(detector, [_w(1), _w(-1)]), 10) == [True, False]
    assert engine.calls == [1, 1, 1] and detector.seen == 6


async def test_several_boxes_waiting_at_once_are_decided_in_one_call(pool) -> None:
    engine = _Engine()
    batcher = VadBatcher(engine, pool, gather_s=0.05)
    boxes = [engine.clone() for _ in range(4)]
    await batcher.decide(boxes[0], [_w(1)])
    await batcher.decide(boxes[1], [_w(1)])  # two boxes heard: from now on requests gather
    engine.calls.clear()
    results = await asyncio.wait_for(
        asyncio.gather(*(batcher.decide(b, [_w(k - 1.5)] * (1 + k % 2)) for k, b in enumerate(boxes))), 10)
    assert results == [[False], [False, False], [True], [True, True]]
    assert engine.calls == [4]


async def test_a_failed_call_reaches_every_caller_and_the_next_call_works(pool) -> None:
    engine = _Engine(fail=True)
    batcher = VadBatcher(engine, pool, gather_s=0.01)
    a, b = engine.clone(), engine.clone()
    results = await asyncio.gather(batcher.decide(a, [_w(1)]), batcher.decide(b, [_w(1)]), return_exceptions=True)
    assert all(isinstance(r, RuntimeError) for r in results)
    engine.fail = False
    assert await asyncio.wait_for(batcher.decide(a, [_w(1)]), 10) == [True]


async def test_a_caller_that_stopped_waiting_is_left_out(pool) -> None:
    engine = _Engine()
    batcher = VadBatcher(engine, pool, gather_s=0.05)
    a, b = engine.clone(), engine.clone()
    await batcher.decide(a, [_w(1)])
    await batcher.decide(b, [_w(1)])
    engine.calls.clear()
    gone = asyncio.create_task(batcher.decide(a, [_w(1)]))
    await asyncio.sleep(0)
    gone.cancel()
    assert await asyncio.wait_for(batcher.decide(b, [_w(-1)]), 10) == [False]
    assert engine.calls == [1] and a.seen == 1


async def test_after_the_pool_is_shut_down_a_request_fails_instead_of_hanging() -> None:
    engine = _Engine()
    pool = ThreadPoolExecutor(1)
    batcher = VadBatcher(engine, pool, gather_s=0.01)
    pool.shutdown()
    with pytest.raises(RuntimeError):
        await asyncio.wait_for(batcher.decide(engine.clone(), [_w(1)]), 10)
