"""The endpointing state machine, driven by audio duration only (no sleeping, no clock)."""

from gateway.voice.endpointing import Endpointer, Event, State

W = 32  # ms per VAD window


def feed(ep: Endpointer, pattern: str) -> list[tuple[int, Event]]:
    """Feed one window per character: 'S' speech, '.' silence. Returns (window index, event)."""
    out = []
    for i, ch in enumerate(pattern):
        out += [(i, e) for e in ep.push(ch == "S", W)]
    return out


def events(ep: Endpointer, pattern: str) -> list[Event]:
    return [e for _, e in feed(ep, pattern)]


def test_silence_alone_never_starts_an_utterance():
    ep = Endpointer()
    assert events(ep, "." * 200) == []
    assert ep.state is State.IDLE


def test_a_click_shorter_than_min_speech_is_ignored():
    ep = Endpointer(min_speech_ms=150)
    assert events(ep, "SSSS" + "." * 40) == []  # 128 ms of "speech"


def test_speech_starts_once_it_lasted_min_speech():
    ep = Endpointer(min_speech_ms=150)
    got = feed(ep, "SSSSSSSS")
    assert got == [(4, Event.SPEECH_START)]  # 5 windows = 160 ms >= 150


def test_endpoint_comes_after_the_configured_trailing_silence():
    ep = Endpointer(min_speech_ms=64, trailing_silence_ms=500, speculative_after_ms=96)
    got = feed(ep, "SSSSSSSSSS" + "." * 30)
    endpoint = [i for i, e in got if e is Event.ENDPOINT]
    assert endpoint == [10 + 16 - 1]  # 16 windows * 32 ms = 512 ms >= 500
    assert ep.state is State.IDLE


def test_speculation_fires_before_the_endpoint_and_once():
    ep = Endpointer(min_speech_ms=64, trailing_silence_ms=500, speculative_after_ms=96)
    got = feed(ep, "SSSSSSSSSS" + "." * 30)
    assert [e for _, e in got] == [Event.SPEECH_START, Event.SPECULATE, Event.ENDPOINT]
    assert [i for i, e in got if e is Event.SPECULATE] == [10 + 3 - 1]


def test_speech_resuming_after_speculation_cancels_it_and_delays_the_endpoint():
    ep = Endpointer(min_speech_ms=64, trailing_silence_ms=500, speculative_after_ms=96)
    got = events(ep, "SSSS" + "....." + "SSS" + "." * 20)
    assert got == [Event.SPEECH_START, Event.SPECULATE, Event.RESUMED, Event.SPECULATE, Event.ENDPOINT]


def test_a_short_pause_inside_a_sentence_is_not_an_endpoint():
    ep = Endpointer(min_speech_ms=64, trailing_silence_ms=500, speculative_after_ms=400)
    assert Event.ENDPOINT not in events(ep, "SSSS" + "." * 10 + "SSSS" + "." * 10 + "SSSS")


def test_max_utterance_length_forces_an_endpoint():
    ep = Endpointer(min_speech_ms=64, max_utterance_ms=1000)
    got = feed(ep, "S" * 33)
    assert [i for i, e in got if e is Event.ENDPOINT] == [31]  # 32 windows = 1024 ms >= 1000
    assert ep.forced


def test_a_new_utterance_can_start_after_an_endpoint():
    ep = Endpointer(min_speech_ms=64, trailing_silence_ms=200, speculative_after_ms=0)
    first = events(ep, "SSS" + "." * 10)
    second = events(ep, "SSS" + "." * 10)
    assert first == second == [Event.SPEECH_START, Event.SPECULATE, Event.ENDPOINT]


def test_window_size_does_not_change_the_decision_time():
    """Same audio in 10 ms or 32 ms windows: the endpoint lands at the same audio time (+-1 window)."""
    def endpoint_ms(window_ms: float) -> float:
        ep = Endpointer(min_speech_ms=100, trailing_silence_ms=500, speculative_after_ms=100)
        t = 0.0
        for speech_ms, speech in ((1000, True), (1000, False)):
            for _ in range(int(speech_ms / window_ms)):
                t += window_ms
                if Event.ENDPOINT in ep.push(speech, window_ms):
                    return t
        raise AssertionError("no endpoint")

    assert abs(endpoint_ms(10) - 1500) <= 10
    assert abs(endpoint_ms(32) - 1500) <= 32
