"""PiperTts: int16 audio at 22050 Hz, one chunk per sentence (its speed: `gateway bench` tts_rtf)."""

from __future__ import annotations

import numpy as np
import pytest

from gateway.config import GatewayConfig
from gateway.engines.piper_tts import PiperTts, espeak_data_dir
from gateway.errors import ModelError
from gateway.engines.store import ModelStore

pytestmark = pytest.mark.models


@pytest.fixture(scope="module")
def voice_files(prepared_cfg: GatewayConfig) -> dict:
    return ModelStore(prepared_cfg).files_of("piper-joe-medium")


@pytest.fixture(scope="module")
def tts(voice_files: dict) -> PiperTts:
    return PiperTts(voice_files["model"], voice_files["config"], length_scale=1.0, num_threads=1)


def test_synthesis_yields_int16_chunks_at_22050_one_per_sentence(tts: PiperTts) -> None:
    # (its speed is a figure of `gateway bench`: tts_rtf)
    chunks = list(tts.synthesize("What time is it? It is half past three in the afternoon."))
    assert tts.sample_rate == 22050
    assert len(chunks) == 2  # one per sentence
    assert all(c.pcm.dtype == np.int16 and c.pcm.ndim == 1 and c.sample_rate == 22050 for c in chunks)
    seconds = sum(len(c.pcm) for c in chunks) / 22050
    assert 2.0 < seconds < 8.0
    assert np.abs(chunks[0].pcm).max() > 10000  # normalised speech, not silence


def test_the_first_chunk_arrives_before_the_last_sentence_is_synthesized(tts: PiperTts) -> None:
    pieces = tts.synthesize("One. Two. Three. Four.")
    first = next(pieces)
    assert len(first.pcm) > 0
    assert len(list(pieces)) == 3


def test_empty_text_yields_nothing_and_punctuation_yields_one_chunk(tts: PiperTts) -> None:
    assert list(tts.synthesize("")) == []
    assert list(tts.synthesize("   ")) == []
    chunks = list(tts.synthesize("..."))
    assert len(chunks) >= 1 and chunks[0].sample_rate == 22050


def test_length_scale_slows_speech_down(voice_files: dict, tts: PiperTts) -> None:
    slow = PiperTts(voice_files["model"], voice_files["config"], length_scale=1.6)
    text = "The quick brown fox jumps over the lazy dog."
    normal_len = sum(len(c.pcm) for c in tts.synthesize(text))
    slow_len = sum(len(c.pcm) for c in slow.synthesize(text))
    assert slow_len > normal_len * 1.3


def test_bundled_espeak_data_is_present() -> None:
    assert (espeak_data_dir() / "en_dict").is_file()


def test_missing_voice_files_are_a_model_error(tmp_path) -> None:
    with pytest.raises(ModelError, match="not found"):
        PiperTts(tmp_path / "v.onnx", tmp_path / "v.onnx.json")


def test_synthesis_reuses_its_memory_instead_of_faulting_in_fresh_pages(voice_files: dict) -> None:
    """The vocoder's tensors (several MB each) come from onnxruntime's arena, emptied after each
    run; without it each was a fresh mmap at the gateway's malloc settings, kernel CPU on top of the
    synthesis. Measured per second of speech: ~27,000 page faults without the arena, ~5,000 with it
    (~10,600 / ~420 under the GLIBC_TUNABLES hugetlb setting `gateway run` re-executes itself with)."""
    import resource

    from gateway.engines.malloc_tuning import tune_malloc

    tune_malloc()  # what load_engines does before the models: large blocks on mmap
    tts = PiperTts(voice_files["model"], voice_files["config"], num_threads=1)
    text = "You can ask me the time, the date, or just say hello. I am doing well, thank you for asking."
    list(tts.synthesize(text))
    before = resource.getrusage(resource.RUSAGE_THREAD).ru_minflt
    seconds = 0.0
    for _ in range(3):
        seconds += sum(len(c.pcm) / c.sample_rate for c in tts.synthesize(text))
    faults = resource.getrusage(resource.RUSAGE_THREAD).ru_minflt - before
    assert faults / seconds < 12000, f"{faults / seconds:.0f} page faults per second of speech"


def test_the_steady_voice_says_a_text_the_same_every_time(tts: PiperTts) -> None:
    def audio(voice: PiperTts) -> np.ndarray:
        return np.concatenate([c.pcm for c in voice.synthesize("Stop. Be quiet, please.")])

    varied = [audio(tts) for _ in range(3)]
    assert any(not np.array_equal(varied[0], a) for a in varied[1:])  # piper samples noise per run
    steady = tts.steady()
    first = audio(steady)
    assert all(np.array_equal(first, audio(steady)) for _ in range(2))
    assert np.array_equal(first, audio(tts.steady()))  # and so does another steady copy
    assert not np.array_equal(audio(tts), first)  # the voice itself is unchanged
