"""The conv2d Piper voice (model store step `piper-conv2d`, `tts.conv2d`): the store derives it, the
engine loads it and it speaks the same audio as the aligned voice (its speed: models/README.md)."""

from __future__ import annotations

import numpy as np
import pytest

from gateway.config import GatewayConfig
from gateway.engines.cpu_features import nchwc_conv_kernels
from gateway.engines.factory import load_tts
from gateway.engines.piper_tts import PiperTts
from gateway.engines.store import ModelStore

pytestmark = pytest.mark.models

VOICE = "piper-joe-medium"
TEXT = "The garden gate is open again. Our neighbour brought us fresh apples today."


@pytest.fixture(scope="module")
def files(prepared_cfg: GatewayConfig) -> dict:
    return ModelStore(prepared_cfg).files_of(VOICE)


def test_the_store_derives_and_verifies_the_conv2d_voice(prepared_cfg: GatewayConfig, files: dict) -> None:
    store = ModelStore(prepared_cfg)
    assert files["conv2d_model"].is_file() and not files["conv2d_model"].is_symlink()
    assert store.verify(VOICE) == []
    entry = store.entry(VOICE)
    (f,) = [f for f in entry.files if f.role == "conv2d_model"]
    assert f.derive == "piper-conv2d" and f.derived_from == "en_US-joe-medium.aligned.onnx"


def test_conv2d_voice_speaks_what_the_aligned_voice_speaks(files: dict) -> None:
    aligned = PiperTts(files["aligned_model"], files["config"], num_threads=1).steady()
    conv2d = PiperTts(files["conv2d_model"], files["config"], num_threads=1).steady()
    assert conv2d.has_alignments and conv2d.sample_rate == aligned.sample_rate
    a, b = list(aligned.synthesize(TEXT)), list(conv2d.synthesize(TEXT))
    assert len(a) == len(b) == 2  # one chunk per sentence
    for x, y in zip(a, b, strict=True):
        assert x.pcm.shape == y.pcm.shape and np.abs(y.pcm).max() > 10000  # speech, not silence
        assert x.phonemes == y.phonemes  # the same durations: the visemes stay aligned
        err = np.sum((x.pcm.astype(np.float64) - y.pcm) ** 2) / np.sum(x.pcm.astype(np.float64) ** 2)
        assert err < 1e-5  # within -50 dB (measured ~-90 dB: the same arithmetic, another order)


def test_tts_conv2d_selects_the_conv2d_voice_and_off_the_aligned_one(prepared_cfg: GatewayConfig) -> None:
    store = ModelStore(prepared_cfg)

    def with_conv2d(value: bool | str) -> GatewayConfig:
        return prepared_cfg.model_copy(update={"tts": prepared_cfg.tts.model_copy(update={"conv2d": value})})

    tts_on, tts_off = load_tts(with_conv2d(True), store), load_tts(with_conv2d(False), store)
    assert tts_on.model_path.name == "en_US-joe-medium.aligned.conv2d.onnx"
    assert tts_off.model_path.name == "en_US-joe-medium.aligned.onnx"
    assert sum(len(c.pcm) for c in tts_on.synthesize("Hello there.")) > 0.3 * tts_on.sample_rate


def test_tts_conv2d_auto_is_the_default_and_follows_the_cpu(prepared_cfg: GatewayConfig) -> None:
    assert GatewayConfig().tts.conv2d == "auto"
    auto = prepared_cfg.model_copy(update={"tts": prepared_cfg.tts.model_copy(update={"conv2d": "auto"})})
    expected = "en_US-joe-medium.aligned.conv2d.onnx" if nchwc_conv_kernels() else "en_US-joe-medium.aligned.onnx"
    assert load_tts(auto, ModelStore(prepared_cfg)).model_path.name == expected


def test_without_a_conv2d_file_tts_conv2d_logs_a_warning_and_runs_the_aligned_voice(
        tmp_path, make_config, manifest_path, caplog: pytest.LogCaptureFixture) -> None:
    import yaml

    data = yaml.safe_load(manifest_path.read_text(encoding="utf-8"))
    (voice,) = [m for m in data["models"] if m["name"] == VOICE]
    voice["files"] = [f for f in voice["files"] if f.get("derive") != "piper-conv2d"]
    data["models"] = [voice]
    manifest = tmp_path / "manifest.yaml"
    manifest.write_text(yaml.safe_dump(data), encoding="utf-8")
    cfg = make_config(tmp_path / "models", manifest, tts={"conv2d": True})
    with caplog.at_level("WARNING", logger="gateway.engines.factory"):
        tts = load_tts(cfg, ModelStore(cfg))
    assert tts.model_path.name == "en_US-joe-medium.aligned.onnx"
    assert any("tts.conv2d" in r.getMessage() and VOICE in r.getMessage() for r in caplog.records)
