"""Outgoing audio pacing, as arithmetic on an injected clock."""

from gateway.audio.pacing import Pacer


def test_the_prebuffer_goes_out_at_once_then_real_time():
    p = Pacer(prebuffer_ms=300)
    now = 100.0
    delays = []
    for _ in range(10):  # ten 60 ms chunks, sent the moment they are due
        d = p.delay_before(60, now)
        delays.append(round(d, 3))
        now += d
        p.sent(60)
    # 0,60,...,240 ms already sent (< 300) -> no wait for the first 6 chunks
    assert delays[:6] == [0.0] * 6
    # afterwards one chunk per 60 ms of real time
    assert delays[6:] == [0.06] * 4


def test_a_late_sender_does_not_wait_to_catch_up():
    p = Pacer(prebuffer_ms=0)
    assert p.delay_before(60, 10.0) == 0.0
    p.sent(60)
    assert p.delay_before(60, 11.0) == 0.0  # already 1 s later than due
