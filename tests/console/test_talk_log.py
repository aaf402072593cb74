"""The Talk page's log on its own (unit tests of its logic, fed bus events by hand): one turn per
transcript with its reply, metrics and audio; bounded per device and per reply; announcements and
turns without words are no turns; a slow live page loses its oldest updates."""

from __future__ import annotations

import numpy as np

from gateway.console import talk_log
from gateway.console.talk_log import TalkLog
from gateway.expression.sentence import SentenceExpression
from gateway.expression.service import SentenceExpressed
from gateway.voice.events import ReplyEnded, Transcribed, TurnFailed, TurnFinished, TurnMetrics

RATE = 16000


def _pcm(seconds: float) -> bytes:
    return np.zeros(int(seconds * RATE), "<i2").tobytes()


def _said(device: str, text: str, seconds: float) -> SentenceExpressed:
    expression = SentenceExpression(text, None, 0.0, (), (), 40, seconds * 1000, False)
    return SentenceExpressed(device, 1, expression, _pcm(seconds), RATE)


def _turn(log: TalkLog, device: str, said: str, reply: str = "Fine.", *, seconds: float = 0.5,
          brain: str = "local", latency: float = 120.0) -> None:
    log.on_event(Transcribed(device, said))
    log.on_event(_said(device, reply, seconds))
    log.on_event(ReplyEnded(device, reply, reply))
    log.on_event(TurnFinished(device, TurnMetrics(device, endpoint_to_first_audio_ms=latency, brain=brain)))


def test_a_turn_has_its_reply_latency_brain_and_audio() -> None:
    log = TalkLog(lambda d: {"box": "anna"}.get(d, d), 5, clock=lambda: 1000.0)
    _turn(log, "box", "How are you?", brain="memory", latency=87.4, seconds=1.5)
    [turn] = log.recent("anna")
    d = turn.as_dict()
    assert (d["said"], d["answered"], d["brain"], d["latency_ms"], d["person"]) == ("How are you?", "Fine.", "memory", 87, "anna")
    assert d["audio"] == f"talk/audio?id={turn.id}" and d["audio_seconds"] == 1.5
    assert log.recent("nobody") == [] and log.recent(device="box") == [turn]
    assert turn.wav()[:4] == b"RIFF"


def test_each_device_keeps_its_last_turns_and_a_reply_at_most_a_minute_of_audio() -> None:
    log = TalkLog(lambda d: d, 3)
    for i in range(5):
        _turn(log, "box", f"question {i}")
    _turn(log, "other", "long story", seconds=talk_log.MAX_REPLY_S + 5)
    assert [t.said for t in log.recent(device="box")] == ["question 4", "question 3", "question 2"]
    assert log.turn(log.recent(device="box")[-1].id) is not None
    assert log.recent(device="other")[0].audio_seconds == talk_log.MAX_REPLY_S


def test_announcements_and_speech_without_words_are_no_turns_and_a_failure_is_kept() -> None:
    log = TalkLog(lambda d: d, 5)
    log.on_event(Transcribed("box", ""))
    log.on_event(ReplyEnded("box", "Time for your pills.", "Time for your pills."))  # an announcement
    assert log.recent() == []
    log.on_event(Transcribed("box", "Hello?"))
    log.on_event(TurnFailed("box", "tts-failed", "Sorry, I cannot speak now."))
    log.on_event(TurnFinished("box", TurnMetrics("box")))
    [turn] = log.recent()
    d = turn.as_dict()
    assert d["failed"] == "tts-failed" and d["answered"] == "Sorry, I cannot speak now."
    assert d["latency_ms"] is None and d["audio"] is None and d["brain"] == ""


def test_a_slow_live_page_loses_its_oldest_updates_and_a_turn_never_ended_is_closed_by_the_next() -> None:
    log = TalkLog(lambda d: d, 200)
    with log.listen() as updates:
        log.on_event(Transcribed("box", "first"))  # its end never comes (the device went away)
        log.on_event(Transcribed("box", "second"))
        assert [u["said"] for u in [updates.get_nowait() for _ in range(3)]] == ["first", "first", "second"]
        first = log.recent()[1]
        assert first.said == "first" and first.done
        for i in range(talk_log.LISTENER_QUEUE + 10):
            _turn(log, "box", f"q{i}")
        assert updates.qsize() == talk_log.LISTENER_QUEUE
        assert updates.get_nowait()["said"] != "q0"  # the oldest went first
    _turn(log, "box", "after")  # the page left: nothing offered to it
    assert updates.qsize() == talk_log.LISTENER_QUEUE - 1


def test_over_the_audio_budget_the_oldest_turns_lose_their_audio_first(monkeypatch) -> None:
    monkeypatch.setattr(talk_log, "MAX_AUDIO_BYTES", int(2.5 * RATE * 2))  # 2.5 s of audio in all
    clock = iter(range(100))
    log = TalkLog(lambda d: d, 10, clock=lambda: float(next(clock)))
    for i in range(3):
        _turn(log, "box" if i != 1 else "other", f"q{i}", seconds=1.0)
    newest, middle, oldest = log.recent()
    assert (oldest.said, oldest.audio_seconds, oldest.as_dict()["audio"]) == ("q0", 0.0, None)
    assert middle.audio_seconds == 1.0 and newest.audio_seconds == 1.0


def test_after_a_barge_in_the_audio_keeps_only_the_sentences_that_began_to_play() -> None:
    log = TalkLog(lambda d: d, 5)
    log.on_event(Transcribed("box", "Tell me a story."))
    for text, seconds in (("Once upon a time.", 1.0), ("There was a box.", 2.0), ("It spoke.", 0.5)):
        log.on_event(_said("box", text, seconds))  # synthesized ahead of the playback
    log.on_event(ReplyEnded("box", "Once upon a time. There was a box.", "Once upon a time. There was a box.", aborted=True))
    log.on_event(TurnFinished("box", TurnMetrics("box", endpoint_to_first_audio_ms=50, barged_in=True, brain="local")))
    [turn] = log.recent()
    assert turn.aborted and turn.audio_seconds == 3.0
    assert turn.as_dict()["answered"] == "Once upon a time. There was a box."


def _across(device: str, said: str, reply: str, *, latency: float = 95.0) -> list[object]:
    """What member gw-a's ClusterEvents publishes of one turn, as member gw-b's bus gets it."""
    from gateway.cluster.events import ClusterEvents

    sender, receiver, heard = ClusterEvents("gw-a", "gw"), ClusterEvents("gw-b", "gw"), []
    events = [Transcribed(device, said), _said(device, reply, 0.5), ReplyEnded(device, reply, reply),
              TurnFinished(device, TurnMetrics(device, endpoint_to_first_audio_ms=latency, brain="llm", reply=reply))]
    for event in events:
        if (out := sender.outgoing(event)) is not None:
            receiver.incoming(device, out[1], heard.append)
    return heard


def test_another_members_turn_is_kept_without_audio_and_names_the_member() -> None:
    log = TalkLog(lambda d: d, 2)
    for event in _across("box", "How are you?", "Fine, thanks."):
        log.on_event(event)
    [turn] = log.recent()
    d = turn.as_dict()
    assert (d["said"], d["answered"], d["brain"], d["latency_ms"], d["gateway"]) == ("How are you?", "Fine, thanks.", "llm", 95, "gw-a")
    assert d["done"] and d["audio"] is None and d["audio_seconds"] == 0 and not turn.pcm
    for i in range(3):  # the same per-device bound as this gateway's own turns
        for event in _across("box", f"question {i}", "Fine."):
            log.on_event(event)
    assert [t.said for t in log.recent()] == ["question 2", "question 1"]
    _turn(log, "own-box", "Hello")  # this gateway's own: no member named
    assert log.recent(device="own-box")[0].as_dict()["gateway"] is None


def test_a_turn_event_from_another_member_that_is_no_turn_event_is_logged_and_dropped(caplog) -> None:
    from gateway.cluster.events import ClusterEvents

    heard: list[object] = []
    events = ClusterEvents("gw-b", "gw")
    events.incoming("box", b'{"gateway": "gw-a", "finished": {"device": "box", "latency_ms": "soon"}}', heard.append)
    events.incoming("box", b'{"gateway": "gw-a", "finished": []}', heard.append)
    events.incoming("box", b'{"gateway": "gw-b", "finished": {"device": "box"}}', heard.append)  # its own
    assert heard == [] and caplog.text.count("cluster gw-b: ignored a turn event on events/box") == 2
    assert "latency_ms 'soon' is not a number" in caplog.text
