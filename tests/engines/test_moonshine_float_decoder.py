"""The model store's float Moonshine decoder (weights dequantized once) computes exactly what the
packaged decoder computes, and `asr.moonshine_decoder: float` runs it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from gateway.config import GatewayConfig
from gateway.engines.factory import load_asr
from gateway.engines.moonshine_fold import float_decoder
from gateway.engines.moonshine_ort import MoonshineOnnxAsr
from gateway.errors import ModelError
from gateway.engines.store import ModelStore

pytestmark = pytest.mark.models


def _decoder_outputs(engine: MoonshineOnnxAsr, audio: np.ndarray) -> tuple[str, list[list[np.ndarray]]]:
    """The transcript and every output of every decoder step."""
    steps: list[list[np.ndarray]] = []
    run = engine._dec.run

    def recording(names, feeds):  # noqa: ANN001, ANN202
        result = run(names, feeds)
        steps.append([np.array(x, copy=True) for x in result])
        return result

    engine._dec.run = recording
    try:
        return engine.transcribe(audio), steps
    finally:
        engine._dec.run = run


def test_the_float_decoder_gives_bit_identical_logits_and_caches_to_the_packaged_one(
    prepared_cfg: GatewayConfig, speech16k, tmp_path
) -> None:
    files = ModelStore(prepared_cfg).files_of("moonshine-base-en")
    if "decoder_float" not in files:  # other onnx/onnxruntime versions than the manifest's: derive it here
        data, _summary = float_decoder(files["decoder"])
        files["decoder_float"] = tmp_path / "decoder_model_float.onnx"
        files["decoder_float"].write_bytes(data)
    assert files["decoder_float"].suffix == ".onnx" and files["decoder"].suffix == ".ort"
    packaged = MoonshineOnnxAsr(files["encoder"], files["decoder"], files["tokens"])
    derived = MoonshineOnnxAsr(files["encoder"], files["decoder_float"], files["tokens"])
    audio = speech16k("Can you turn on the lights in the kitchen please?")
    text, ours = _decoder_outputs(derived, audio)
    expected_text, theirs = _decoder_outputs(packaged, audio)
    assert text == expected_text and "kitchen" in text.lower()
    assert len(ours) == len(theirs) >= 8
    for step, (mine, reference) in enumerate(zip(ours, theirs)):
        for a, b in zip(mine, reference, strict=True):
            assert a.shape == b.shape and np.array_equal(a, b), f"step {step} differs"


def test_asr_moonshine_decoder_float_runs_the_float_decoder(prepared_cfg: GatewayConfig) -> None:
    files = ModelStore(prepared_cfg).files_of("moonshine-base-en")
    cfg = prepared_cfg.model_copy(update={"asr": prepared_cfg.asr.model_copy(update={"moonshine_decoder": "float"})})
    asr = load_asr(cfg, ModelStore(prepared_cfg))
    assert isinstance(asr, MoonshineOnnxAsr)
    # the packaged .ort only where the derived decoder was skipped (other onnx/onnxruntime versions)
    expected = "decoder_model_float.onnx" if "decoder_float" in files else "decoder_model_merged.ort"
    assert asr._dec._model_path.endswith(expected)  # noqa: SLF001


def test_a_model_that_is_not_the_quantized_merged_decoder_is_refused_with_a_model_error(
    prepared_cfg: GatewayConfig,
) -> None:
    encoder = ModelStore(prepared_cfg).files_of("moonshine-base-en")["encoder"]
    with pytest.raises(ModelError, match="not the quantized merged Moonshine decoder"):
        float_decoder(Path(encoder))
