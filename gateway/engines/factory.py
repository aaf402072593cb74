"""Build the configured VAD, ASR and TTS engines, preparing bundled models on first use.

The engine modules are imported inside the loaders, so importing this module stays cheap and
does not pull in sherpa-onnx or piper.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING

from gateway.config import AsrConfig, GatewayConfig
from gateway.engines.base import AsrEngine, TtsEngine, VadEngine
from gateway.engines.cpu_features import int8_matmul_kernels, nchwc_conv_kernels
from gateway.engines.malloc_tuning import tune_malloc
from gateway.errors import ModelError
from gateway.engines.store import ModelStore

if TYPE_CHECKING:
    from gateway.engines.piper_tts import PiperTts

Progress = Callable[[str], None]

log = logging.getLogger(__name__)


def _quiet(_: str) -> None: ...


@dataclass(frozen=True)
class Engines:
    vad: VadEngine  # the prototype: call `vad.clone()` once per device session
    asr: AsrEngine
    tts: TtsEngine
    load_seconds: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))


def _files(store: ModelStore, name: str, kind: str, key: str, progress: Progress) -> dict[str, Path]:
    entry = store.entry(name)
    if entry.kind != kind:
        raise ModelError(f"{key} = {name!r} is a model of kind {entry.kind}, not {kind}")
    if not store.is_prepared(name):
        progress(f"preparing {name} (first use)")
    return store.files_of(name, progress)


def load_vad(cfg: GatewayConfig, store: ModelStore, progress: Progress = _quiet) -> VadEngine:
    from gateway.engines.silero_vad import SileroVad

    files = _files(store, cfg.vad.model, "vad", "vad.model", progress)
    return SileroVad(files["model"], cfg.vad.threshold)


def load_asr(cfg: GatewayConfig, store: ModelStore, progress: Progress = _quiet) -> AsrEngine:
    from gateway.engines.sherpa_asr import MoonshineAsr, OnlineAsr

    a: AsrConfig = cfg.asr
    if a.engine == "whisper":
        from gateway.engines.whisper_ct2 import WhisperCt2Asr

        files = _files(store, a.model, "asr", "asr.model", progress)
        if "model" not in files or "tokenizer" not in files:
            raise ModelError(f"asr.model = {a.model!r} is not a CTranslate2 Whisper model (asr.engine whisper "
                             f"needs one, e.g. whisper-tiny-en)")
        return WhisperCt2Asr(files["model"].parent, num_threads=a.num_threads, beam_size=a.beam_size,
                             language=a.language, compute_type=a.compute_type, window=a.window)
    if (whisper := a.second_opinion_asr()) is not None:
        from gateway.engines.asr_cross import CrossScoredAsr
        from gateway.engines.asr_second_opinion import SecondOpinionAsr

        alone = a.model_copy(update={"second_opinion": "none", "second_opinion_choice": "own"})
        first = load_asr(cfg.model_copy(update={"asr": alone}), store, progress)
        second = load_asr(cfg.model_copy(update={"asr": whisper}), store, progress)
        if a.second_opinion_choice == "cross":  # both models score every candidate
            return CrossScoredAsr(first, second, a.second_opinion_below, a.cross_weight,  # type: ignore[arg-type]
                                  a.cross_score)
        return SecondOpinionAsr(first, second, a.second_opinion_below)  # type: ignore[arg-type]  # both score
    if a.engine in ("moonshine", "moonshine-sherpa"):
        files = _files(store, a.model, "asr", "asr.model", progress)
        if a.engine == "moonshine-sherpa":
            return MoonshineAsr(files["encoder"], files["decoder"], files["tokens"], a.num_threads)
        from gateway.engines.moonshine_ort import MoonshineOnnxAsr

        # asr.moonshine_decoder: a decoder the model store derives (int8 weights multiplied as int8, or
        # weights dequantized once to float), when it could; else the packaged one. int8 on a CPU
        # without the dot-product instructions of MatMulNBits' int8 kernels (a Raspberry Pi 4): the
        # same weights on onnxruntime's 8-bit integer GEMM (moonshine_nbits.py, products="qgemm").
        role = {"int8": "decoder_int8" if int8_matmul_kernels() else "decoder_int8_qgemm",
                "float": "decoder_float"}.get(a.moonshine_decoder)
        decoder = files.get(role, files["decoder"]) if role else files["decoder"]
        if role == "decoder_int8_qgemm":
            progress("asr.moonshine_decoder int8: this CPU has no integer dot-product instructions for "
                     "MatMulNBits' int8 kernels (e.g. a Raspberry Pi 4); running the int8 decoder on "
                     "onnxruntime's 8-bit integer GEMM (DynamicQuantizeMatMul)")
        return MoonshineOnnxAsr(files["encoder"], decoder, files["tokens"], a.num_threads,
                                int8_decoder=decoder in (files.get("decoder_int8"), files.get("decoder_int8_qgemm")),
                                beam_size=a.beam_size)
    paths = {k: (cfg.path(p) if p is not None else None)
             for k, p in (("encoder", a.encoder), ("decoder", a.decoder),
                          ("joiner", a.joiner), ("tokens", a.tokens))}
    return OnlineAsr(a.engine, num_threads=a.num_threads, **paths)


def load_tts(cfg: GatewayConfig, store: ModelStore, progress: Progress = _quiet) -> "PiperTts":
    from gateway.engines.piper_tts import PiperTts

    files = _files(store, cfg.tts.voice, "tts", "tts.voice", progress)
    # The aligned voice (same weights, phoneme timings exposed) when the manifest derives one;
    # with tts.conv2d, its 2-D-convolution form (gateway/engines/piper_conv2d.py) when prepared;
    # `auto` (the default): where that form was measured to cost less CPU (cpu_features.py).
    model = files.get("aligned_model", files["model"])
    if nchwc_conv_kernels() if cfg.tts.conv2d == "auto" else cfg.tts.conv2d:
        if "conv2d_model" not in files:  # an optional derived file: a folder prepared before has none yet
            store.prepare(cfg.tts.voice, progress)
            files = store.files_of(cfg.tts.voice, progress)
        if "conv2d_model" in files:
            model = files["conv2d_model"]
        else:
            log.warning("tts.conv2d: the voice %s has no conv2d file (not in the manifest, or the derived file's "
                        "checksum differed, see `gateway models prepare %s`); running %s",
                        cfg.tts.voice, cfg.tts.voice, model.name)
    return PiperTts(model, files["config"], cfg.tts.length_scale, cfg.tts.num_threads)


def load_engines(cfg: GatewayConfig, store: ModelStore, progress: Progress = _quiet) -> Engines:
    """Load VAD, ASR and TTS (blocking, a few seconds). Raises ModelError naming what is missing."""
    tune_malloc()  # before the models: freed load buffers must leave the process (malloc_tuning.py)
    loaded: dict[str, object] = {}
    seconds: dict[str, float] = {}
    for what, loader in (("vad", load_vad), ("asr", load_asr), ("tts", load_tts)):
        start = time.perf_counter()
        try:
            loaded[what] = loader(cfg, store, progress)
        except ImportError as exc:
            raise ModelError(
                f"the {what} engine needs the Python module {exc.name!r}, which is not installed "
                f"(`pip install -e .` in the gateway checkout installs every engine dependency)"
            ) from exc
        seconds[what] = time.perf_counter() - start
        progress(f"loaded {what} in {seconds[what]:.2f} s")
    return Engines(vad=loaded["vad"], asr=loaded["asr"], tts=loaded["tts"],  # type: ignore[arg-type]
                   load_seconds=MappingProxyType(seconds))
