"""The per-address limit on new boxes (gateway/links/xiaozhi/enrol_limit.py), on a test clock: a
burst of `per_hour`, then one every 3600/per_hour s; a slot given back is usable again; each
address has its own; the state kept is bounded."""

from __future__ import annotations

from gateway.links.xiaozhi import enrol_limit
from gateway.links.xiaozhi.enrol_limit import NewBoxLimit


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_burst_then_one_slot_per_interval_and_retry_after_says_when():
    clock = Clock()
    limit = NewBoxLimit(4, clock)  # one slot every 900 s
    assert [limit.take("10.0.0.5") for _ in range(5)] == [True] * 4 + [False]
    assert limit.retry_after_s("10.0.0.5") == 900
    clock.now += 899
    assert not limit.take("10.0.0.5") and limit.retry_after_s("10.0.0.5") == 1
    clock.now += 1
    assert limit.take("10.0.0.5") and not limit.take("10.0.0.5")
    assert limit.take("10.0.0.6")  # another address: its own bucket
    clock.now += 10 * 3600
    assert [limit.take("10.0.0.5") for _ in range(5)] == [True] * 4 + [False]  # refilled to the burst, no more


def test_a_slot_given_back_is_usable_again():
    limit = NewBoxLimit(1, Clock())
    assert limit.take("a")
    limit.give_back("a")
    assert limit.take("a") and not limit.take("a")
    assert limit.retry_after_s("a") == 3600


def test_the_addresses_kept_are_bounded(monkeypatch):
    monkeypatch.setattr(enrol_limit, "MAX_ADDRESSES", 3)
    limit = NewBoxLimit(1, Clock())
    for address in ("a", "b", "c", "d"):
        assert limit.take(address)
    assert len(limit._buckets) == 3 and limit.take("a")  # "a" was forgotten: a fresh bucket
