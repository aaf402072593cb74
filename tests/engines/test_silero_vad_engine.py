"""SileroVad: speech windows from the real voice are speech; silence and low noise are not; one
shared onnxruntime session gives every detector the decisions sherpa-onnx's own VadModel gave,
and detectors sharing it keep independent state."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from gateway.config import GatewayConfig
from gateway.engines.silero_vad import SileroVad
from gateway.errors import ModelError
from gateway.engines.store import ModelStore

pytestmark = pytest.mark.models


@pytest.fixture(scope="module")
def vad(prepared_cfg: GatewayConfig) -> SileroVad:
    files = ModelStore(prepared_cfg).files_of("silero-vad")
    return SileroVad(files["model"], threshold=0.5)


def _run(vad: SileroVad, audio: np.ndarray) -> list[bool]:
    vad.reset()
    return [vad.is_speech(audio[i : i + 512]) for i in range(0, len(audio) - 511, 512)]


def test_synthesized_speech_is_detected_and_surrounding_silence_is_not(vad: SileroVad, speech16k) -> None:
    speech = speech16k("What time is it? Please turn on the kitchen light.")
    silence = np.zeros(16000, np.float32)
    flags = _run(vad, np.concatenate([silence, speech, silence]))
    lead, body, tail = flags[:31], flags[31 : 31 + len(speech) // 512], flags[-20:]
    assert not any(lead)
    assert sum(body) / len(body) > 0.7
    assert not any(tail)


@pytest.mark.parametrize("amplitude", [0.0, 0.001, 0.003, 0.01])
def test_silence_and_low_noise_are_not_speech(vad: SileroVad, amplitude: float) -> None:
    noise = np.random.default_rng(7).standard_normal(16000 * 3).astype(np.float32) * amplitude
    assert not any(_run(vad, noise))


def test_a_window_of_the_wrong_size_raises_instead_of_killing_the_process(vad: SileroVad) -> None:
    with pytest.raises(ValueError, match="512 samples"):
        vad.is_speech(np.zeros(576, np.float32))
    with pytest.raises(ValueError):
        vad.is_speech(np.zeros((2, 512), np.float32))


def test_float64_windows_are_converted_and_window_attributes_are_exposed(vad: SileroVad) -> None:
    assert (vad.sample_rate, vad.window_samples) == (16000, 512)
    vad.reset()
    assert vad.is_speech(np.zeros(512, np.float64)) is False


def test_clones_keep_separate_state(vad: SileroVad, speech16k) -> None:
    speech = speech16k("Hello there, how are you doing today?")
    a, b = vad.clone(), vad.clone()
    assert any(_run(a, speech))
    # b never saw audio: a silent window right after is not speech for b ...
    assert b.is_speech(np.zeros(512, np.float32)) is False
    # ... and a's state did not leak into the prototype either.
    assert _run(vad, np.zeros(8000, np.float32)) == [False] * 15


def test_a_per_session_clone_is_a_fresh_detector_of_the_same_model(vad: SileroVad) -> None:
    # (what a clone costs is a figure of `gateway bench`: vad_clone_ms)
    clones = [vad.clone() for _ in range(3)]
    assert len({id(c) for c in clones} | {id(vad)}) == 4
    for c in clones:
        assert (c.model_path, c.sample_rate, c.window_samples) == (vad.model_path, 16000, 512)
        assert c.is_speech(np.zeros(512, np.float32)) is False


def _sherpa_reference(model: Path, audio: np.ndarray) -> list[bool]:
    """What the gateway's VAD was before: sherpa-onnx's VadModel, fed 64 samples of context + 512."""
    import sherpa_onnx

    cfg = sherpa_onnx.VadModelConfig()
    cfg.silero_vad.model = str(model)
    cfg.silero_vad.threshold = 0.5
    cfg.silero_vad.min_speech_duration = 0.02
    cfg.silero_vad.min_silence_duration = 0.02
    cfg.silero_vad.window_size = 512
    cfg.sample_rate = 16000
    cfg.num_threads = 1
    ref = sherpa_onnx.VadModel.create(cfg)
    context, flags = np.zeros(64, np.float32), []
    for i in range(0, len(audio) - 511, 512):
        window = audio[i : i + 512]
        flags.append(bool(ref.is_speech(np.concatenate([context, window]))))
        context = window[-64:].copy()
    return flags


def _conversation(speech16k) -> np.ndarray:
    gap = np.zeros(8000, np.float32)
    return np.concatenate([gap, speech16k("What time is it? Please turn on the kitchen light."), gap,
                           speech16k("Hello there, how are you doing today?"), gap])


@pytest.mark.parametrize("noise", [0.0, 0.02, 0.1])
def test_the_shared_session_decides_every_window_as_sherpa_onnx_did(vad: SileroVad, speech16k, noise: float) -> None:
    audio = _conversation(speech16k)
    audio = audio + np.random.default_rng(3).standard_normal(len(audio)).astype(np.float32) * noise
    expected = _sherpa_reference(vad.model_path, audio)
    got = _run(vad.clone(), audio)
    assert sum(expected) > 60  # both sentences are there
    assert got == expected


def test_two_sessions_interleaved_decide_as_each_would_alone(vad: SileroVad, speech16k) -> None:
    one = _conversation(speech16k)
    other = np.random.default_rng(5).standard_normal(len(one)).astype(np.float32) * 0.05 + np.roll(one, 7000)
    alone_one, alone_other = _run(vad.clone(), one), _run(vad.clone(), other)
    assert alone_one != alone_other
    a, b = vad.clone(), vad.clone()
    together = [(a.is_speech(one[i : i + 512]), b.is_speech(other[i : i + 512]))
                for i in range(0, len(one) - 511, 512)]
    assert [x for x, _ in together] == alone_one
    assert [y for _, y in together] == alone_other


@pytest.mark.parametrize("noise", [0.0, 0.05])
def test_many_detectors_decided_together_decide_as_each_would_alone(vad: SileroVad, speech16k, noise: float) -> None:
    """decide_many (every box's windows in one run per step, gateway/engines/vad_batch.py): the same
    decisions and states as is_speech, with 1 or 2 windows per detector per call and a detector
    that sits a call out."""
    one = _conversation(speech16k)
    rng = np.random.default_rng(11)
    streams = [np.roll(one, shift) + rng.standard_normal(len(one)).astype(np.float32) * noise
               for shift in (0, 5000, 11000, 17000)]
    alone = [vad.clone() for _ in streams]
    together = [vad.clone() for _ in streams]
    expected: list[list[bool]] = [[] for _ in streams]
    got: list[list[bool]] = [[] for _ in streams]
    position = [0] * len(streams)
    windows = (len(one) - 511) // 512
    for call in range(10_000):
        requests, who = [], []
        for k, audio in enumerate(streams):
            if (call + k) % 5 == 4 or position[k] >= windows:
                continue  # this box sent nothing this time
            n = min(1 + (call + k) % 2, windows - position[k])
            chunk = [audio[(position[k] + j) * 512 : (position[k] + j + 1) * 512] for j in range(n)]
            position[k] += n
            expected[k] += [alone[k].is_speech(w) for w in chunk]
            requests.append((together[k], chunk))
            who.append(k)
        if not requests:
            break
        for k, decisions in zip(who, vad.decide_many(requests)):
            got[k] += decisions
    assert all(sum(e) > 60 for e in expected)  # both sentences are in every stream
    assert got == expected
    for a, b in zip(alone, together):
        np.testing.assert_allclose(a._state, b._state, atol=1e-6)


def test_detectors_of_another_model_are_decided_with_their_own(vad: SileroVad, speech16k) -> None:
    speech = speech16k("Hello there, how are you doing today?")
    other_model = SileroVad(vad.model_path)  # its own session
    a, b = vad.clone(), other_model.clone()
    chunk = [speech[i : i + 512] for i in range(0, 512 * 40, 512)]
    assert vad.decide_many([(a, chunk), (b, chunk)]) == [_run(vad.clone(), speech[: 512 * 40])] * 2


def test_clones_share_the_loaded_model(vad: SileroVad) -> None:
    a, b = vad.clone(), vad.clone()
    assert a._session is b._session is vad._session


def test_a_file_that_is_not_a_silero_model_is_a_model_error(tmp_path) -> None:
    bad = tmp_path / "silero_vad.onnx"
    bad.write_bytes(b"not an onnx model")
    with pytest.raises(ModelError, match="gateway models prepare silero-vad"):
        SileroVad(bad)


def test_a_missing_model_file_is_a_model_error(tmp_path) -> None:
    with pytest.raises(ModelError, match="not found"):
        SileroVad(tmp_path / "nope.onnx")
