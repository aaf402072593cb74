"""load_engines: builds VAD, ASR and TTS from the config, preparing models on first use."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from gateway.engines.factory import Engines, load_asr, load_engines, load_tts
from gateway.errors import ModelError
from gateway.engines.store import ModelStore

pytestmark = pytest.mark.models


def test_default_config_loads_all_three_engines_and_prepares_models_first(
    tmp_path: Path, make_config
) -> None:
    cfg = make_config(tmp_path)
    lines: list[str] = []
    engines = load_engines(cfg, ModelStore(cfg), lines.append)
    assert isinstance(engines, Engines)
    assert "preparing moonshine-base-en (first use)" in lines
    assert "preparing moonshine-base-en: deriving tokens.txt (32000 tokens)" in lines
    assert set(engines.load_seconds) == {"vad", "asr", "tts"}
    assert engines.vad.window_samples == 512 and engines.asr.sample_rate == 16000
    assert engines.tts.sample_rate == 22050
    session_vad = engines.vad.clone()
    assert session_vad.is_speech(np.zeros(512, np.float32)) is False
    with pytest.raises(dataclasses.FrozenInstanceError):
        engines.vad = session_vad  # type: ignore[misc]


def test_a_model_of_the_wrong_kind_is_a_model_error(tmp_path: Path, make_config) -> None:
    cfg = make_config(tmp_path, vad={"model": "moonshine-base-en"})
    with pytest.raises(ModelError, match="vad.model = 'moonshine-base-en' is a model of kind asr, not vad"):
        load_engines(cfg, ModelStore(cfg))


def test_a_transducer_whose_files_do_not_exist_is_a_model_error(tmp_path: Path, make_config) -> None:
    asr = {"engine": "transducer", **{k: f"dl/{k}.onnx" for k in ("encoder", "decoder", "joiner", "tokens")}}
    cfg = make_config(tmp_path, asr=asr)
    with pytest.raises(ModelError, match=r"asr.encoder = .*dl/encoder.onnx does not exist"):
        load_asr(cfg, ModelStore(cfg))


def test_load_tts_alone_gives_float_audio_for_tools(prepared_cfg, store: ModelStore) -> None:
    audio, rate = load_tts(prepared_cfg, store).synthesize_float("Hello there.")
    assert rate == 22050 and audio.dtype == np.float32
    assert 0.3 < len(audio) / rate < 3 and 0.2 < np.abs(audio).max() <= 1.0
