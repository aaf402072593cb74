"""The model store's MiniLM with int8 embedding lookups computes exactly the packaged model's
vectors, keeps its embedding tables int8 under onnxruntime's optimiser, and is what the
memory's embedder runs."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from gateway.engines.cpu_features import int8_matmul_kernels
from gateway.engines.minilm_embed import MiniLmEmbedder, load_embedder
from gateway.engines.store import ModelStore

pytestmark = pytest.mark.models

TEXTS = ["blood pressure 152 over 93 mmHg, measured 2026-11-30 07:15 by bp-1",
         "what is my name?", "My name is Alice and I like gardening in the morning."]


def test_the_derived_model_gives_bit_identical_vectors_and_the_embedder_runs_it(store: ModelStore) -> None:
    files = store.files_of("all-minilm-l6-v2-int8")
    tokenizer = store.files_of("all-minilm-l6-v2-tokenizer")["tokenizer"]
    assert "model_gather_int8" in files, "the derived model was not prepared (checksum mismatch?)"
    packaged = MiniLmEmbedder(files["model"], tokenizer).embed(TEXTS)
    derived = MiniLmEmbedder(files["model_gather_int8"], tokenizer).embed(TEXTS)
    assert np.array_equal(packaged, derived)


def test_the_int8_model_gives_nearly_the_same_vectors_and_the_embedder_runs_it(store: ModelStore) -> None:
    files = store.files_of("all-minilm-l6-v2-int8")
    tokenizer = store.files_of("all-minilm-l6-v2-tokenizer")["tokenizer"]
    assert "model_int8" in files, "the derived model was not prepared (checksum mismatch?)"
    packaged = MiniLmEmbedder(files["model"], tokenizer).embed(TEXTS)
    derived = MiniLmEmbedder(files["model_int8"], tokenizer).embed(TEXTS)
    assert not np.array_equal(packaged, derived)  # int8 activations in the products ...
    assert np.all((packaged * derived).sum(axis=1) > 0.999)  # ... the same vectors within 1e-3
    np.testing.assert_allclose(derived @ derived.T, packaged @ packaged.T, atol=0.005)  # and the same ranking
    expected = files["model_int8"] if int8_matmul_kernels() else files["model_gather_int8"]  # cpu_features.py
    assert load_embedder("all-minilm-l6-v2-int8", store)._model_path == expected


_RSS_OF_A_SESSION = """
import sys
import onnxruntime as ort
def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS"):
            return int(line.split()[1]) / 1024
opts = ort.SessionOptions()
opts.enable_cpu_mem_arena = False
before = rss()
session = ort.InferenceSession(sys.argv[1], opts, providers=["CPUExecutionProvider"])
print(rss() - before)
"""


def test_onnxruntime_keeps_the_derived_models_word_embedding_int8(store: ModelStore) -> None:
    """The 30522 x 384 table folded to float is 47 MB; kept int8 it is 12 MB (a fresh process
    each, with a fixed mmap threshold so freed load buffers do not count)."""
    files = store.files_of("all-minilm-l6-v2-int8")
    env = {"MALLOC_MMAP_THRESHOLD_": str(256 * 1024), "PATH": ""}
    grown = {role: float(subprocess.run([sys.executable, "-c", _RSS_OF_A_SESSION, str(files[role])], env=env,
                                        capture_output=True, text=True, check=True).stdout)
             for role in ("model", "model_gather_int8", "model_int8")}
    assert grown["model"] - grown["model_gather_int8"] > 25, grown
    assert grown["model_gather_int8"] - grown["model_int8"] > 15, grown  # the MatMul weights stay int8 too
