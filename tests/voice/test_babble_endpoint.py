"""The endpoint in background speech (vad.relative_drop_db): the VAD hears a TV or other people
talking as speech, so the trailing silence never comes; windows far enough under the utterance's
own speech level count as silence. Unit tests of the state machine on given decisions and levels,
then the proof on real audio: a piper question with piper babble 10 dB under it going on 25 s
after it, through the Listener with the real Silero VAD."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from gateway.audio.pcm import resample
from gateway.config import load_config, parse_config
from gateway.voice.endpointing import _LOUD_ROOM_EXTRA_MS, _QUIET_EXTRA_MS, Endpointer, Event
from gateway.voice.listener import Heard, Listener

W = 32.0  # ms per window


def run(ep: Endpointer, windows: list[tuple[bool, float]]) -> list[tuple[float, Event]]:
    """(ms into the stream, event) for (is_speech, level dB) windows."""
    out = []
    for i, (speech, level) in enumerate(windows):
        out += [((i + 1) * W, e) for e in ep.push(speech, W, level)]
    return out


def ms(n: float) -> int:
    return round(n / W)


def endpointer(drop: float) -> Endpointer:
    return Endpointer(150, 500, 120, 20_000, relative_drop_db=drop)


def question_then_babble(babble_db: float = -32.0) -> list[tuple[bool, float]]:
    # 2 s of the talker at -20 dB (a 0.2 s quiet word at -35 inside), then the VAD hears speech on
    # for 10 s: the babble under him.
    talk = [(True, -20.0)] * ms(1000) + [(True, -35.0)] * ms(200) + [(True, -20.0)] * ms(800)
    return talk + [(True, babble_db)] * ms(10_000)


def test_without_it_babble_keeps_the_utterance_open_until_max_length() -> None:
    events = run(Endpointer(150, 500, 120, 5_000), question_then_babble())
    assert [e for _, e in events][:2] == [Event.SPEECH_START, Event.ENDPOINT]
    assert events[1][0] >= 5_000  # only the maximum length ended it


def test_windows_under_the_talkers_level_end_the_utterance_as_silence() -> None:
    ep = endpointer(8)
    events = run(ep, question_then_babble())
    ends = [t for t, e in events if e is Event.ENDPOINT]
    assert len(ends) == 1 and not ep.forced
    assert 2000 + 500 <= ends[0] <= 2000 + 500 + _QUIET_EXTRA_MS + W  # trailing silence + the quiet extra
    assert Event.SPECULATE not in [e for _, e in events]  # the VAD never heard silence: decoded at the end
    assert [e for _, e in events].count(Event.SPEECH_START) == 1  # the babble after it starts none


def test_babble_within_the_loud_room_drop_is_still_the_talker() -> None:
    events = run(endpointer(8), question_then_babble(babble_db=-24.0))  # only 4 dB under
    assert not [t for t, e in events if e is Event.ENDPOINT and t < 11_000]


def test_a_loud_room_ends_the_utterance_by_the_slower_rule() -> None:
    """Babble 6 dB under the talker (a loud TV) is within the 8 dB drop; windows 5 dB under count
    for the slower rule, which ends the question trailing_silence + the loud room's extra after it."""
    ep = endpointer(8)
    events = run(ep, question_then_babble(babble_db=-26.0))
    ends = [t for t, e in events if e is Event.ENDPOINT]
    assert len(ends) == 1 and not ep.forced
    assert 2000 + 500 + _LOUD_ROOM_EXTRA_MS - W <= ends[0] <= 2000 + 500 + _LOUD_ROOM_EXTRA_MS + W
    assert Event.SPECULATE not in [e for _, e in events]  # the VAD never heard silence


def test_the_loud_room_rule_is_off_with_the_drop() -> None:
    plain = Endpointer(150, 500, 120, 20_000)
    assert run(endpointer(0), question_then_babble(-26.0)) == run(plain, question_then_babble(-26.0))


def test_a_quiet_stretch_shorter_than_the_trailing_silence_does_not_cut_the_question() -> None:
    talk = [(True, -20.0)] * ms(1000) + [(True, -40.0)] * ms(700) + [(True, -20.0)] * ms(800)
    events = run(endpointer(8), talk + [(False, -90.0)] * ms(600))
    ends = [t for t, e in events if e is Event.ENDPOINT]
    assert ends == [pytest.approx(2500 + 512, abs=W)]  # the VAD's own silence after the last word


def test_quiet_hangover_before_the_vads_silence_never_ends_later_than_the_vad_alone() -> None:
    talk = [(True, -20.0)] * ms(1500) + [(True, -60.0)] * ms(200) + [(False, -90.0)] * ms(900)
    plain = [t for t, e in run(Endpointer(150, 500, 120, 20_000), talk) if e is Event.ENDPOINT]
    relative = [t for t, e in run(endpointer(8), talk) if e is Event.ENDPOINT]
    assert len(plain) == len(relative) == 1 and relative[0] <= plain[0]
    spec = [[t for t, e in run(ep, talk) if e is Event.SPECULATE] for ep in (endpointer(0), endpointer(8))]
    assert spec[0] == spec[1]  # the speculative decode starts where it did


def test_no_level_before_enough_speech_was_counted() -> None:
    ep = endpointer(8)
    run(ep, [(True, -20.0)] * ms(320))  # speech started, but the level is not trusted yet
    assert ep.state.value == "speech" and ep.speech_level_db is None
    assert not run(ep, [(True, -40.0)] * ms(400))  # counted as the talker
    assert ep.speech_level_db is not None


def test_real_silence_forgets_the_level_and_a_new_question_starts_in_babble() -> None:
    ep = endpointer(8)
    windows = question_then_babble() + [(False, -90.0)] * ms(600) + [(True, -32.0)] * ms(500)
    windows += [(True, -21.0)] * ms(1000)  # babble is speech again, then someone asks at -21 dB
    starts = [t for t, e in run(ep, windows) if e is Event.SPEECH_START]
    talker_at = (len(windows) - ms(1000)) * W
    assert len(starts) == 2 and starts[1] < talker_at  # the babble itself started it
    no_silence = question_then_babble() + [(True, -21.0)] * ms(1000)
    talker_at = (len(no_silence) - ms(1000)) * W
    starts = [t for t, e in run(endpointer(8), no_silence) if e is Event.SPEECH_START]
    assert len(starts) == 2 and starts[1] >= talker_at + 150  # the new talker started it, not the babble


def test_off_by_zero_ignores_levels() -> None:
    plain = Endpointer(150, 500, 120, 20_000)
    assert run(endpointer(0), question_then_babble()) == run(plain, question_then_babble())


# --- real audio ----------------------------------------------------------------------------------

QUESTION = "What is the weather going to be like tomorrow in the city?"
BABBLE = ["The meeting moved to Thursday afternoon at three.", "I think the red one is much nicer than that.",
          "Could you pass me the salt and the pepper please?", "We drove all the way to the coast last summer."]


def _babble_mix(speak, snr_db: float, after_s: float) -> tuple[np.ndarray, float]:
    """16 kHz: the question, then `after_s` of babble; babble from the start, `snr_db` under it."""
    q, rate = speak(QUESTION)
    q = resample(q, rate, 16000)
    voiced = q[np.abs(q) > 0.01]
    end_s = (np.nonzero(np.abs(q) > 0.01)[0][-1] + 1) / 16000
    n = q.size + int(16000 * after_s)
    babble = np.zeros(n, np.float32)
    for k, text in enumerate(BABBLE):
        talk, r = speak(text)
        talk = resample(talk, r, 16000)
        loud = np.nonzero(np.abs(talk) > 0.01)[0]
        talk = talk[loud[0] : loud[-1] + 1]  # the speech only: babble has no pauses
        talk /= np.sqrt(np.mean(talk**2)) + 1e-9
        babble += np.resize(np.roll(talk, -k * 4000), n)
    gain = np.sqrt(np.mean(voiced**2) / (np.mean(babble**2) * 10 ** (snr_db / 10)))
    audio = np.concatenate([q, np.zeros(n - q.size, np.float32)]) + gain * babble
    return audio.astype(np.float32), end_s


async def _endpoint_after(runner, cfg, audio: np.ndarray, drop: float) -> list[float]:
    v = cfg.vad
    lst = Listener(runner, runner.vad.clone(),
                   Endpointer(v.min_speech_ms, v.trailing_silence_ms, v.speculative_after_ms,
                              v.max_utterance_s * 1000, drop), 16000, v.preroll_ms)
    ends = []
    step = 16000 * 20 // 1000
    for i in range(0, audio.size, step):
        ends += [h.audio_ms / 1000 for h in await lst.feed(audio[i : i + step])
                 if isinstance(h, Heard) and h.event is Event.ENDPOINT]
    return ends


RECOMMENDED_DROP_DB = 8.0  # docs/CONFIG.md vad.relative_drop_db (the default)


@pytest.mark.models
@pytest.mark.asyncio(loop_scope="session")
@pytest.mark.parametrize("snr_db", [20.0, 10.0])
async def test_a_question_in_continuous_babble_ends_seconds_after_it(runner, cfg, speak, snr_db) -> None:
    audio, end_s = _babble_mix(speak, snr_db, after_s=25.0)
    # (the VAD alone usually finds no endpoint here, but piper's babble differs run to run and a
    # fresh-clone CI run once found one 0.8 s after the question: not asserted)
    ends = await _endpoint_after(runner, cfg, audio, drop=RECOMMENDED_DROP_DB)
    first = [t for t in ends if t > end_s - 0.5]
    assert first and first[0] < end_s + 3.0, (end_s, ends)
    assert not [t for t in ends if t < end_s - 0.5]  # the question itself was not cut


def test_the_shipped_default_is_the_measured_drop() -> None:
    """The default and gateway.yaml end an utterance in babble (docs/CONFIG.md vad.relative_drop_db)."""
    root = Path(__file__).resolve().parents[2]
    assert parse_config({}, root).vad.relative_drop_db == RECOMMENDED_DROP_DB
    assert load_config(root / "gateway.yaml").vad.relative_drop_db == RECOMMENDED_DROP_DB


@pytest.mark.models
@pytest.mark.asyncio(loop_scope="session")
async def test_a_clean_question_with_a_falling_end_is_ended_by_the_silence_not_cut(runner, cfg, speak) -> None:
    """No babble: the question's own quiet end ("... doing this morning?") is no reason to end it
    before the VAD's silence. With the quiet extra at 0.3 s the endpoint came 0.6-0.8 s early in
    about half of piper's renderings of this sentence (its sampling noise on: each one differs)."""
    for _ in range(6):
        q, rate = speak("Hello there, how are you doing this morning?")
        audio = np.concatenate([resample(q, rate, 16000), np.zeros(24000, np.float32)])
        assert (await _endpoint_after(runner, cfg, audio, drop=RECOMMENDED_DROP_DB)
                == await _endpoint_after(runner, cfg, audio, drop=0.0))
