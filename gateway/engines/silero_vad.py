"""Silero VAD (v5 ONNX) on onnxruntime: ONE inference session shared by every device session,
each detector holding only its own state (a 2x1x128 LSTM state, 64 samples of context and the
smoothing counters, under 2 KB).

Before, every device session owned a `sherpa_onnx.VadModel` (its own onnxruntime session, ~6.5 MB
RSS each, ~30-40 ms to create) and loading the first one mapped sherpa-onnx's own copy of the
onnxruntime library (~29 MB) beside the one the Moonshine and piper engines use. The model's
inputs are (input [1, 576], state [2, 1, 128], sr) and its outputs (probability, new state), so
one session runs any number of streams: the state goes in and comes back with each window.
`InferenceSession.run` may be called from several threads at once (the runner's VAD workers).

What a detector returns per 512-sample window is what sherpa-onnx's `VadModel.is_speech`
returned (silero-vad-model.cc, re-implemented here and checked against it in
tests/engines/test_silero_vad_engine.py on the same audio):

* The model sees 576 samples: the 64-sample tail of the previous window + the 512 new ones.
* The first window above the threshold returns False (onset is reported on the second speech
  window, 32 ms late); while speaking the threshold drops by 0.15 (hysteresis); after speech a
  window below the threshold still returns True for min_silence (20 ms: one window). The
  endpointing state machine in gateway/voice does the real smoothing (min speech, trailing
  silence) driven by audio duration.

Per 32 ms window: ~0.1 ms on one x86-64 core.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnxruntime

from gateway.errors import ModelError

SAMPLE_RATE = 16000
WINDOW = 512
CONTEXT = 64
HYSTERESIS = 0.15
_MIN_SPEECH_SAMPLES = int(SAMPLE_RATE * 0.02)
_MIN_SILENCE_SAMPLES = int(SAMPLE_RATE * 0.02)
_STATE_SHAPE = (2, 1, 128)


def silero_session(model_path: Path) -> onnxruntime.InferenceSession:
    """The one session every detector runs: one thread per call, no spinning, no arena (its
    buffers are a few KB; an arena would keep the high-water mark of concurrent calls)."""
    opts = onnxruntime.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    opts.enable_cpu_mem_arena = False
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    opts.log_severity_level = 3
    try:
        session = onnxruntime.InferenceSession(str(model_path), sess_options=opts,
                                               providers=["CPUExecutionProvider"])
    except Exception as exc:  # onnxruntime raises its own exception types
        raise ModelError(f"cannot load the Silero VAD model {model_path}: {exc} "
                         f"(run `gateway models prepare silero-vad`)") from exc
    inputs = [i.name for i in session.get_inputs()]
    outputs = [o.name for o in session.get_outputs()]
    if inputs != ["input", "state", "sr"] or len(outputs) != 2:
        raise ModelError(f"{model_path} is not a Silero v5 VAD model (inputs {inputs}, outputs {outputs}); "
                         f"use silero_vad.onnx")
    return session


def _checked(window: np.ndarray) -> np.ndarray:
    if window.shape != (WINDOW,):
        raise ValueError(f"VAD window must be {WINDOW} samples, got shape {window.shape}")
    return np.ascontiguousarray(window, dtype=np.float32)


class SileroVad:
    """VadEngine: `is_speech(window)` on 512 float32 samples at 16 kHz. One detector per device
    session (`clone()`); detectors share the loaded model and may run on different threads, each
    detector on one thread at a time."""

    sample_rate = SAMPLE_RATE
    window_samples = WINDOW

    def __init__(self, model_path: Path | str, threshold: float = 0.5,
                 session: onnxruntime.InferenceSession | None = None) -> None:
        model_path = Path(model_path)
        if session is None and not model_path.is_file():
            raise ModelError(f"Silero VAD model not found: {model_path}")
        if not 0.0 < threshold < 1.0:
            raise ModelError(f"VAD threshold must be between 0 and 1, got {threshold}")
        self.model_path = model_path
        self.threshold = threshold
        self._session = session if session is not None else silero_session(model_path)
        self._sr = np.array(SAMPLE_RATE, np.int64)
        self.reset()

    def is_speech(self, window: np.ndarray) -> bool:
        samples = _checked(window)
        frame = np.concatenate((self._context, samples))[None, :]
        prob, self._state = self._session.run(None, {"input": frame, "state": self._state, "sr": self._sr})
        self._context = samples[-CONTEXT:].copy()
        return self._smoothed(float(prob.reshape(-1)[0]))

    def decide_many(self, requests: list[tuple["SileroVad", list[np.ndarray]]]) -> list[list[bool]]:
        """`is_speech` for several detectors' consecutive windows at once, each detector at most once
        in `requests`: one onnxruntime run per window step for every detector of one model (clones
        share it) that has a window at that step, the model's batch dimension carrying each
        detector's own state. ~2x less CPU per window at 4-8 detectors than one run each (2-core
        VM); the same states and decisions as `is_speech` (tests/engines/test_silero_vad_engine.py)."""
        decisions: list[list[bool]] = [[] for _ in requests]
        models: dict[int, list[int]] = {}  # id(session) -> the requests of its detectors
        for i, (detector, _) in enumerate(requests):
            models.setdefault(id(detector._session), []).append(i)
        for indices in models.values():
            session = requests[indices[0]][0]._session
            steps = max(len(requests[i][1]) for i in indices)
            for step in range(steps):
                active = [(i, requests[i][0], _checked(requests[i][1][step])) for i in indices
                          if len(requests[i][1]) > step]
                frames = np.stack([np.concatenate((d._context, w)) for _, d, w in active])
                states = np.concatenate([d._state for _, d, _ in active], axis=1)
                probs, new_states = session.run(None, {"input": frames, "state": states, "sr": self._sr})
                for row, (i, detector, samples) in enumerate(active):
                    detector._state = np.ascontiguousarray(new_states[:, row : row + 1, :])
                    detector._context = samples[-CONTEXT:].copy()
                    decisions[i].append(detector._smoothed(float(probs[row, 0])))
        return decisions

    def _smoothed(self, prob: float) -> bool:
        """sherpa-onnx's SileroVadModel::IsSpeech decision on one window's probability."""
        th = self.threshold
        self._sample += WINDOW
        if prob > th:
            self._temp_end = 0
            if self._temp_start == 0:
                self._temp_start = self._sample  # must last min_speech: reported on the next window
                return False
            if not self._triggered:
                if self._sample - self._temp_start < _MIN_SPEECH_SAMPLES:
                    return False
                self._triggered = True
                return True
        if prob < th and not self._triggered:
            self._temp_start = self._temp_end = 0
            return False
        if prob > th - HYSTERESIS and self._triggered:
            return True
        if prob < th and self._triggered:
            if self._temp_end == 0:
                self._temp_end = self._sample
            if self._sample - self._temp_end < _MIN_SILENCE_SAMPLES:
                return True
            self._temp_start = self._temp_end = 0
            self._triggered = False
        return False

    def reset(self) -> None:
        self._state = np.zeros(_STATE_SHAPE, np.float32)
        self._context = np.zeros(CONTEXT, np.float32)
        self._triggered = False
        self._sample = self._temp_start = self._temp_end = 0

    def clone(self) -> "SileroVad":
        """A fresh detector with its own state, running the same loaded model."""
        return SileroVad(self.model_path, self.threshold, self._session)
