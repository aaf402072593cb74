"""The files of a prepared model that are derived from a package file instead of linked: one
function per manifest `derive` name (models/manifest.yaml), each giving the bytes and a summary.

The model store (gateway/engines/store.py) writes what they return and checks its sha256. The
ONNX rewrites need onnx, so each is imported only when it runs.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from pathlib import Path

from gateway.errors import ModelError


def moonshine_tokens(tokenizer_bin: bytes) -> list[bytes]:
    """Decode Moonshine's tokenizer.bin: length-prefixed byte strings, index = token id."""
    tokens: list[bytes] = []
    i = 0
    while i < len(tokenizer_bin):
        b0 = tokenizer_bin[i]
        i += 1
        if b0 == 0:
            tokens.append(b"")
            continue
        n = b0 if b0 < 128 else tokenizer_bin[i] * 128 + (b0 - 128)
        i += 0 if b0 < 128 else 1
        if i + n > len(tokenizer_bin):
            raise ModelError(f"tokenizer.bin is truncated at token {len(tokens)}")
        tokens.append(tokenizer_bin[i : i + n])
        i += n
    return tokens


def _derive_moonshine_tokens(src: Path) -> tuple[bytes, str]:
    tokens = moonshine_tokens(src.read_bytes())
    text = "".join(f"{base64.b64encode(t).decode()} {k}\n" for k, t in enumerate(tokens))
    return text.encode("ascii"), f"{len(tokens)} tokens"


def _derive_piper_alignment(src: Path) -> tuple[bytes, str]:
    from gateway.engines.piper_align import patched_voice  # needs onnx: imported only when deriving

    return patched_voice(src)


def _derive_piper_conv2d(src: Path) -> tuple[bytes, str]:
    from gateway.engines.piper_conv2d import conv2d_voice  # needs onnx: imported only when deriving

    return conv2d_voice(src)


def _derive_moonshine_float_decoder(src: Path) -> tuple[bytes, str]:
    from gateway.engines.moonshine_fold import float_decoder  # needs onnx: imported only when deriving

    return float_decoder(src)


def _derive_moonshine_int8_decoder(src: Path) -> tuple[bytes, str]:
    from gateway.engines.moonshine_nbits import int8_decoder  # needs onnx: imported only when deriving

    return int8_decoder(src)


def _derive_moonshine_int8_qgemm_decoder(src: Path) -> tuple[bytes, str]:
    from gateway.engines.moonshine_nbits import int8_decoder  # needs onnx: imported only when deriving

    return int8_decoder(src, products="qgemm")


def _derive_minilm_gather_int8(src: Path) -> tuple[bytes, str]:
    from gateway.engines.minilm_fold import gather_first  # needs onnx: imported only when deriving

    return gather_first(src)


def _derive_minilm_int8(src: Path) -> tuple[bytes, str]:
    from gateway.engines.minilm_fold import int8_model  # needs onnx: imported only when deriving

    return int8_model(src)


DERIVERS: dict[str, Callable[[Path], tuple[bytes, str]]] = {
    "moonshine-tokens": _derive_moonshine_tokens,
    "moonshine-float-decoder": _derive_moonshine_float_decoder,
    "moonshine-int8-decoder": _derive_moonshine_int8_decoder,
    "moonshine-int8-qgemm-decoder": _derive_moonshine_int8_qgemm_decoder,
    "piper-alignment": _derive_piper_alignment,
    "piper-conv2d": _derive_piper_conv2d,
    "minilm-gather-int8": _derive_minilm_gather_int8,
    "minilm-int8": _derive_minilm_int8,
}
