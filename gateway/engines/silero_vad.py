"""Silero VAD (v5 ONNX) through `sherpa_onnx.VadModel`: one detector per device session.

What `VadModel.is_speech` does (sherpa-onnx 2.0.1, silero-vad-model.cc), verified here:

* It wants `window_size()` = 576 samples: 64 samples of context (the tail of the previous
  window) + 512 new ones. Any other length makes the C++ side call `exit(-1)`, killing the
  process, so this wrapper checks the length in Python and keeps the 64-sample context itself.
* It is stateful: the LSTM state, plus a small smoothing machine. The first window above the
  threshold always returns False (onset is reported on the second speech window, 32 ms late);
  while speaking the threshold drops by 0.15 (hysteresis); after speech it keeps returning True
  for `min_silence_duration`. We set min speech/silence to 20 ms, so onset and offset are each
  one window late and no more: the endpointing state machine in gateway/voice does the real
  smoothing (min speech, trailing silence) driven by audio duration.
* Its sample counter is an int32: it would overflow after ~37 h without a reset, so we reset
  during silence long before that.

Cost: each `VadModel` owns an onnxruntime session: ~30-40 ms to create and ~6.5 MB RSS each
(measured on a 2-core x86-64), so `clone()` per device session is fine for tens of devices,
not thousands. Per 32 ms window: ~0.08 ms.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import sherpa_onnx

from gateway.errors import ModelError

SAMPLE_RATE = 16000
WINDOW = 512
CONTEXT = 64
_MIN_SPEECH_S = 0.02
_MIN_SILENCE_S = 0.02
_RESET_AFTER_WINDOWS = 2**31 // WINDOW // 2  # well before the int32 sample counter overflows


def _vad_config(model_path: Path, threshold: float) -> "sherpa_onnx.VadModelConfig":
    cfg = sherpa_onnx.VadModelConfig()
    cfg.silero_vad.model = str(model_path)
    cfg.silero_vad.threshold = threshold
    cfg.silero_vad.min_speech_duration = _MIN_SPEECH_S
    cfg.silero_vad.min_silence_duration = _MIN_SILENCE_S
    cfg.silero_vad.window_size = WINDOW
    cfg.sample_rate = SAMPLE_RATE
    cfg.num_threads = 1
    return cfg


class SileroVad:
    """VadEngine: `is_speech(window)` on 512 float32 samples at 16 kHz."""

    sample_rate = SAMPLE_RATE
    window_samples = WINDOW

    def __init__(self, model_path: Path | str, threshold: float = 0.5) -> None:
        model_path = Path(model_path)
        if not model_path.is_file():
            raise ModelError(f"Silero VAD model not found: {model_path}")
        if not 0.0 < threshold < 1.0:
            raise ModelError(f"VAD threshold must be between 0 and 1, got {threshold}")
        self.model_path = model_path
        self.threshold = threshold
        self._config = _vad_config(model_path, threshold)
        if not self._config.validate():
            raise ModelError(f"sherpa-onnx rejected the VAD config for {model_path}")
        self._model = sherpa_onnx.VadModel.create(self._config)
        if self._model.window_size() != WINDOW + CONTEXT:
            raise ModelError(
                f"{model_path} is not a Silero v5 model that sherpa-onnx runs with 512-sample "
                f"windows (window_size()={self._model.window_size()}); use silero_vad.onnx"
            )
        self._context = np.zeros(CONTEXT, dtype=np.float32)
        self._windows = 0
        self._speaking = False

    def is_speech(self, window: np.ndarray) -> bool:
        if window.shape != (WINDOW,):
            raise ValueError(f"VAD window must be {WINDOW} samples, got shape {window.shape}")
        samples = np.ascontiguousarray(window, dtype=np.float32)
        if self._windows >= _RESET_AFTER_WINDOWS and not self._speaking:
            self.reset()
        self._speaking = bool(self._model.is_speech(np.concatenate((self._context, samples))))
        self._context = samples[-CONTEXT:].copy()
        self._windows += 1
        return self._speaking

    def reset(self) -> None:
        self._model.reset()
        self._context = np.zeros(CONTEXT, dtype=np.float32)
        self._windows = 0
        self._speaking = False

    def clone(self) -> "SileroVad":
        """A fresh detector with its own state (and its own onnxruntime session)."""
        return SileroVad(self.model_path, self.threshold)
