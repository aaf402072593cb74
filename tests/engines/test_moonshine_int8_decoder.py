"""The model store's int8 Moonshine decoders (weights kept int8, multiplied by MatMulNBits, or by
DynamicQuantizeMatMul for CPUs without dot-product instructions) hold exactly the packaged
decoder's weights, hear what the float decoder hears, and int8 is the default."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from gateway.config import GatewayConfig
from gateway.engines.cpu_features import int8_matmul_kernels
from gateway.engines import factory
from gateway.engines.factory import load_asr
from gateway.engines.moonshine_fold import _as_onnx
from gateway.engines.moonshine_nbits import int8_decoder
from gateway.engines.moonshine_ort import MoonshineOnnxAsr
from gateway.engines.store import ModelStore
from gateway.errors import ModelError

pytestmark = pytest.mark.models


@pytest.fixture(scope="module")
def files(prepared_cfg: GatewayConfig, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    found = dict(ModelStore(prepared_cfg).files_of("moonshine-base-en"))
    for role, products in (("decoder_int8", "nbits"), ("decoder_int8_qgemm", "qgemm")):
        if role not in found:  # other onnx/onnxruntime versions than the manifest's: derive it here
            found[role] = tmp_path_factory.mktemp("int8") / f"{role}.onnx"
            found[role].write_bytes(int8_decoder(found["decoder"], products)[0])
    return found


def _packaged_weights(ort_file: Path, tmp: Path) -> dict[str, np.ndarray]:
    """{weight name: q * s + z} computed from the packaged decoder's int8 tensors."""
    _as_onnx(ort_file, tmp / "packaged.onnx")
    graph = onnx.load(str(tmp / "packaged.onnx")).graph
    inits = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    producer = {n.output[0]: n for n in graph.node}
    weights = {}
    for node in graph.node:
        if node.op_type == "Add" and node.name.endswith("_add_node"):
            mul = producer[node.input[0]]
            q = inits[producer[mul.input[0]].input[0]]
            weights[node.output[0]] = q.astype(np.float32) * inits[mul.input[1]] + inits[node.input[1]]
    return weights


def test_every_product_multiplies_by_exactly_the_packaged_weights(files, tmp_path) -> None:
    expected = _packaged_weights(files["decoder"], tmp_path)
    model = onnx.load(str(files["decoder_int8"]))
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    checked = set()
    for attr in model.graph.node[0].attribute:
        for node in attr.g.node:
            if node.op_type != "MatMulNBits":
                continue
            u8, scale, zp = (inits[name] for name in node.input[1:4])
            n, blocks, block = u8.shape
            k = next(a.i for a in node.attribute if a.name == "K")
            rows = (u8.astype(np.float32) - zp.reshape(n, blocks, 1)) * scale.reshape(n, blocks, 1)
            weight = rows.reshape(n, blocks * block)[:, :k]
            name = node.input[1].removesuffix("/u8")
            reference = expected[name] if name.startswith("model.decoder.embed_tokens.") else expected[name].T
            np.testing.assert_allclose(weight, reference, rtol=1e-6, atol=1e-7)
            checked.add(name)
    assert checked == set(expected)  # every weight, the token embedding's projection included


def test_every_qgemm_product_multiplies_by_exactly_the_packaged_weights(files, tmp_path) -> None:
    expected = _packaged_weights(files["decoder"], tmp_path)
    model = onnx.load(str(files["decoder_int8_qgemm"]))
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    checked, ops = set(), set()
    for attr in model.graph.node[0].attribute:
        for node in attr.g.node:
            ops.add(node.op_type)
            if node.op_type != "DynamicQuantizeMatMul":
                continue
            u8, scale, zp = (inits[name] for name in node.input[1:4])
            assert u8.dtype == zp.dtype == np.uint8 and scale.size == zp.size == 1  # u8 x u8: exact int32 sums
            weight = (u8.astype(np.float32) - np.float32(zp)) * scale  # [K, N]
            name = node.input[1].removesuffix("/u8")
            reference = expected[name].T if name.startswith("model.decoder.embed_tokens.") else expected[name]
            np.testing.assert_allclose(weight, reference, rtol=1e-6, atol=1e-7)
            checked.add(name)
    assert checked == set(expected)
    assert "MatMulNBits" not in ops  # the kernels this decoder is for the CPUs without


@pytest.mark.parametrize("sentence", [
    "Can you turn on the lights in the kitchen please?",
    "What was my blood pressure this morning?",
    "The quick brown fox jumps over the lazy dog.",
])
def test_the_int8_decoders_hear_the_words_the_float_decoder_hears(files, speech16k, sentence: str) -> None:
    reference = MoonshineOnnxAsr(files["encoder"], files.get("decoder_float", files["decoder"]), files["tokens"])
    audio = speech16k(sentence)
    expected = reference.transcribe(audio)
    for role in ("decoder_int8", "decoder_int8_qgemm"):
        int8 = MoonshineOnnxAsr(files["encoder"], files[role], files["tokens"], int8_decoder=True)
        assert int8.transcribe(audio) == expected, role


@pytest.mark.parametrize(("choice", "dot_product", "expected"), [
    ("int8", True, "decoder_model_int8.onnx"),
    ("int8", False, "decoder_model_int8_qgemm.onnx"),  # e.g. a Raspberry Pi 4's Cortex-A72
    ("float", True, "decoder_model_float.onnx"),
    ("packaged", True, "decoder_model_merged.ort"),
])
def test_asr_moonshine_decoder_picks_the_decoder(prepared_cfg: GatewayConfig, monkeypatch: pytest.MonkeyPatch,
                                                 choice: str, dot_product: bool, expected: str) -> None:
    store = ModelStore(prepared_cfg)
    prepared = store.files_of("moonshine-base-en")
    if dot_product and not int8_matmul_kernels():  # this CPU lacks them: MatMulNBits would crawl
        pytest.skip("no int8 dot-product kernels on this CPU")
    monkeypatch.setattr(factory, "int8_matmul_kernels", lambda: dot_product)
    role = {"decoder_model_int8.onnx": "decoder_int8", "decoder_model_int8_qgemm.onnx": "decoder_int8_qgemm",
            "decoder_model_float.onnx": "decoder_float"}.get(expected)
    if role and role not in prepared:  # skipped at preparation (other onnx/onnxruntime versions)
        expected = "decoder_model_merged.ort"
    cfg = prepared_cfg.model_copy(update={"asr": prepared_cfg.asr.model_copy(update={"moonshine_decoder": choice})})
    lines: list[str] = []
    asr = load_asr(cfg, store, lines.append)
    assert isinstance(asr, MoonshineOnnxAsr)
    assert asr._dec._model_path.endswith(expected)  # noqa: SLF001
    assert any("DynamicQuantizeMatMul" in line for line in lines) == expected.endswith("_qgemm.onnx")


def test_the_default_is_the_int8_decoder(prepared_cfg: GatewayConfig) -> None:
    assert prepared_cfg.asr.moonshine_decoder == "int8"


def test_a_model_that_is_not_the_quantized_merged_decoder_is_refused_with_a_model_error(files) -> None:
    with pytest.raises(ModelError, match="not"):
        int8_decoder(Path(files["encoder"]))
