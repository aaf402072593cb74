"""The fake engines: what the fake TTS says, the fake ASR hears, through the device audio path."""

from __future__ import annotations

import numpy as np
import pytest

from gateway.audio.pcm import float_to_s16le, int16_to_float, resample, s16le_to_float
from gateway.engines.base import AsrEngine, TtsEngine, VadEngine
from gateway.engines.fake import FakeAsr, FakeTts, FakeVad


def said(text: str, rate: int, tts: FakeTts | None = None) -> np.ndarray:
    """`text` said by the fake TTS, resampled to `rate` and through int16, as a device gets it."""
    tts = tts or FakeTts()
    (chunk,) = tts.synthesize(text)
    return s16le_to_float(float_to_s16le(resample(int16_to_float(chunk.pcm), chunk.sample_rate, rate)))


@pytest.mark.parametrize("text", ["What time is it?", "Hello   oooo!!", "Grüße, 你好 — ok", "It is 9:15 AM.",
                                  "a" * 40])
@pytest.mark.parametrize("rate", [8000, 16000, 22050, 24000])
def test_the_fake_asr_hears_exactly_what_the_fake_tts_said_at_any_device_rate(text: str, rate: int) -> None:
    audio = np.concatenate([np.zeros(rate // 3, np.float32), said(text, rate), np.zeros(rate // 2, np.float32)])
    assert FakeAsr().transcribe(resample(audio, rate, 16000)) == text


def test_a_clipped_onset_loses_nothing_and_a_pause_is_heard_as_a_word_space() -> None:
    first, second = said("Stop here.", 16000)[48:], said("Then go on", 16000)  # 3 ms of onset lost
    audio = np.concatenate([first, np.zeros(4000, np.float32), second])
    assert FakeAsr().transcribe(audio) == "Stop here. Then go on"
    joined = np.concatenate([said("capital", 16000), np.zeros(800, np.float32), said("of", 16000)])
    assert FakeAsr().transcribe(joined) == "capitalof"  # 50 ms: no pause


def test_silence_and_noise_are_no_words_or_not_the_words() -> None:
    asr = FakeAsr()
    assert asr.transcribe(np.zeros(16000, np.float32)) == ""
    assert asr.transcribe(np.zeros(10, np.float32)) == ""
    noise = np.random.default_rng(7).normal(0, 0.2, 16000).astype(np.float32)
    assert asr.transcribe(noise) != "What time is it?"


def test_the_fake_tts_gives_one_chunk_with_phoneme_timings_that_cover_it() -> None:
    tts = FakeTts(sample_rate=22050, nibble_ms=20)
    (chunk,) = tts.synthesize("Hi, Bob")
    assert chunk.sample_rate == 22050 and chunk.pcm.dtype == np.int16
    assert chunk.pcm.size == 7 * 2 * 441  # 40 ms per ASCII character
    assert chunk.phonemes is not None and [p for p, _ in chunk.phonemes] == ["h", "i", ",", " ", "b", "o", "b"]
    assert sum(n for _, n in chunk.phonemes) == chunk.pcm.size
    assert list(tts.synthesize("   ")) == []
    assert np.array_equal(next(tts.synthesize("Hi, Bob")).pcm, chunk.pcm)  # deterministic


def test_the_fake_vad_calls_loud_windows_speech_and_zeros_silence() -> None:
    vad = FakeVad()
    assert vad.is_speech(said("hello", 16000)[:512])
    assert not vad.is_speech(np.zeros(512, np.float32))
    assert not vad.is_speech(np.full(512, 0.01, np.float32))
    clone = vad.clone()
    assert clone is not vad and clone.window_samples == 512 and clone.sample_rate == 16000
    with pytest.raises(ValueError):
        vad.is_speech(np.zeros(100, np.float32))


def test_the_fakes_implement_the_engine_protocols() -> None:
    vad: VadEngine = FakeVad()
    asr: AsrEngine = FakeAsr()
    tts: TtsEngine = FakeTts()
    assert (vad.sample_rate, asr.sample_rate, tts.sample_rate) == (16000, 16000, 22050)
    with pytest.raises(ValueError):
        FakeTts(nibble_ms=5)
