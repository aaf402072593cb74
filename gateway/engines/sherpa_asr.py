"""Speech recognition through sherpa-onnx.

`MoonshineAsr` is the default: offline (whole utterance) Moonshine base-en from the moonshine-cpp
package. `OnlineAsr` runs a streaming transducer/paraformer model the user downloaded, but is
used the same way (`transcribe(audio)` on a finished utterance), so the rest of the gateway does
not care which one is configured.

Both recognizers may be called from one thread at a time (the engine runner guarantees that).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Literal

import numpy as np

from gateway.engines.base import DecodeCancelled
from gateway.errors import AsrError, ModelError

SAMPLE_RATE = 16000
_MIN_SAMPLES = 160  # 10 ms; an empty input makes the Moonshine encoder fail
_QUOTES = "\"'`\u2018\u2019\u201c\u201d"


def clean_transcript(text: str) -> str:
    """Strip whitespace and the stray quote characters Moonshine sometimes adds at the edges."""
    return text.strip().strip(_QUOTES).strip()


def _warmup_audio(seconds: float = 1.0) -> np.ndarray:
    """Low, deterministic noise: enough to run the whole graph (all-zero input is skipped)."""
    rng = np.random.default_rng(0)
    return (rng.standard_normal(int(SAMPLE_RATE * seconds)) * 0.01).astype(np.float32)


def _require_files(**paths: Path | None) -> dict[str, Path]:
    missing = [k for k, p in paths.items() if p is None]
    if missing:
        raise ModelError(f"ASR model: missing {', '.join(missing)} (set asr.{missing[0]} in gateway.yaml)")
    found: dict[str, Path] = {}
    for key, p in paths.items():
        assert p is not None
        if not Path(p).is_file():
            raise ModelError(f"ASR model: asr.{key} = {p} does not exist")
        found[key] = Path(p)
    return found


def _as_input(audio: np.ndarray) -> np.ndarray:
    if audio.ndim != 1:
        raise AsrError(f"ASR input must be mono (1-d), got shape {audio.shape}")
    if audio.dtype == np.int16:
        return (audio.astype(np.float32) / 32768.0)
    return np.ascontiguousarray(audio, dtype=np.float32)


class MoonshineAsr:
    """AsrEngine for Moonshine (base-en) via `OfflineRecognizer.from_moonshine_v2`."""

    sample_rate = SAMPLE_RATE

    def __init__(self, encoder: Path | str, decoder: Path | str, tokens: Path | str,
                 num_threads: int = 2) -> None:
        import sherpa_onnx  # here, not at the top: the default engines import this module's helpers

        files = _require_files(encoder=Path(encoder), decoder=Path(decoder), tokens=Path(tokens))
        try:
            self._rec = sherpa_onnx.OfflineRecognizer.from_moonshine_v2(
                encoder=str(files["encoder"]), decoder=str(files["decoder"]),
                tokens=str(files["tokens"]), num_threads=num_threads,
            )
        except (RuntimeError, ValueError) as exc:
            raise ModelError(f"cannot load Moonshine from {files['encoder'].parent}: {exc}") from exc
        # The first decode is ~1 s slower (graph optimisation, allocations): pay it now.
        self.transcribe(_warmup_audio())

    def transcribe(self, audio: np.ndarray, cancel: threading.Event | None = None) -> str:
        """`cancel` is not looked at: sherpa-onnx decodes the utterance in one call."""
        samples = _as_input(audio)
        if samples.size < _MIN_SAMPLES:
            return ""
        try:
            stream = self._rec.create_stream()
            stream.accept_waveform(SAMPLE_RATE, samples)
            self._rec.decode_stream(stream)
            return clean_transcript(stream.result.text)
        except RuntimeError as exc:
            raise AsrError(f"Moonshine decode failed: {exc}") from exc


OnlineKind = Literal["transducer", "paraformer"]


class OnlineAsr:
    """AsrEngine for streaming sherpa-onnx models (zipformer transducer, paraformer).

    The models are not on PyPI (release archives only), so users point asr.encoder/decoder/
    joiner/tokens at files they downloaded. `transcribe` feeds the whole utterance, 0.5 s of
    silence as tail padding, marks the input finished and decodes while frames are ready.
    """

    sample_rate = SAMPLE_RATE
    _TAIL_S = 0.5

    def __init__(self, kind: OnlineKind, *, encoder: Path | None, decoder: Path | None,
                 tokens: Path | None, joiner: Path | None = None, num_threads: int = 2) -> None:
        if kind == "transducer":
            f = _require_files(encoder=encoder, decoder=decoder, joiner=joiner, tokens=tokens)
        elif kind == "paraformer":
            if joiner is not None:
                raise ModelError("ASR model: asr.joiner is only for engine: transducer (remove it)")
            f = _require_files(encoder=encoder, decoder=decoder, tokens=tokens)
        else:
            raise ModelError(f"ASR model: unknown online engine {kind!r} (transducer or paraformer)")
        import sherpa_onnx

        try:
            if kind == "transducer":
                self._rec = sherpa_onnx.OnlineRecognizer.from_transducer(
                    tokens=str(f["tokens"]), encoder=str(f["encoder"]), decoder=str(f["decoder"]),
                    joiner=str(f["joiner"]), num_threads=num_threads, sample_rate=SAMPLE_RATE,
                )
            else:
                self._rec = sherpa_onnx.OnlineRecognizer.from_paraformer(
                    tokens=str(f["tokens"]), encoder=str(f["encoder"]), decoder=str(f["decoder"]),
                    num_threads=num_threads, sample_rate=SAMPLE_RATE,
                )
        except (RuntimeError, ValueError) as exc:
            raise ModelError(f"cannot load the {kind} model {f['encoder']}: {exc}") from exc
        self.kind = kind
        self.transcribe(_warmup_audio())

    def transcribe(self, audio: np.ndarray, cancel: threading.Event | None = None) -> str:
        """`cancel` set: stops between the stream's decode calls (DecodeCancelled)."""
        samples = _as_input(audio)
        if samples.size < _MIN_SAMPLES:
            return ""
        try:
            stream = self._rec.create_stream()
            stream.accept_waveform(SAMPLE_RATE, samples)
            stream.accept_waveform(SAMPLE_RATE, np.zeros(int(SAMPLE_RATE * self._TAIL_S), np.float32))
            stream.input_finished()
            while self._rec.is_ready(stream):
                if cancel is not None and cancel.is_set():
                    raise DecodeCancelled()
                self._rec.decode_stream(stream)
            return clean_transcript(self._rec.get_result(stream))
        except RuntimeError as exc:
            raise AsrError(f"{self.kind} decode failed: {exc}") from exc
