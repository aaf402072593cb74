"""Text to speech with Piper (piper-tts, GPL-3.0-or-later; espeak-ng data bundled).

`PiperVoice.load` always builds its onnxruntime session with default options (one intra-op
thread per core), so we build the session ourselves with `intra_op_num_threads=num_threads`
and hand it to the `PiperVoice` dataclass. Speaking rate is `SynthesisConfig.length_scale`
(< 1 faster, > 1 slower). Piper yields one chunk per sentence, which we pass on as soon as it
is ready.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnxruntime
from piper import PiperConfig, PiperVoice, SynthesisConfig
from piper.phonemize_espeak import ESPEAK_DATA_DIR

from gateway.engines.base import SynthChunk
from gateway.errors import ModelError, TtsError

_EMPTY_SENTENCE_MS = 50


def espeak_data_dir() -> Path:
    """Where piper's bundled espeak-ng data lives."""
    return Path(ESPEAK_DATA_DIR)


def _session(onnx: Path, num_threads: int) -> onnxruntime.InferenceSession:
    opts = onnxruntime.SessionOptions()
    opts.intra_op_num_threads = num_threads
    opts.inter_op_num_threads = 1
    opts.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
    # A memory arena, emptied after every run (`ShrinkingSession`). Without one every tensor of the
    # vocoder (several MB each for a sentence) is a fresh malloc, which glibc serves by mmap at the
    # gateway's fixed threshold (gateway/engines/malloc_tuning.py) and unmaps again: ~10,000 page
    # faults per second of speech, 0.05 s of kernel CPU per second of speech (~35% on top of the
    # synthesis itself, 2-core VM). In the arena the run reuses its blocks (~450 faults per second
    # of speech); given back at the end of the run, the arena keeps no high-water mark (resident
    # memory as without it; kept, it held ~100 MB more).
    opts.enable_cpu_mem_arena = True
    # No spin-waiting between operators (see gateway/engines/moonshine_ort.py): ~0.8 -> ~0.5 s CPU
    # and wall per 3 s sentence on the busy 2-core VM, where the TTS workers share the cores.
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return onnxruntime.InferenceSession(str(onnx), sess_options=opts,
                                        providers=["CPUExecutionProvider"])


class ShrinkingSession:
    """The voice's session as piper calls it (`run`, `get_outputs`), each run with the run option
    that gives the arena's memory back when the run ends (concurrent runs keep what they use)."""

    def __init__(self, session: onnxruntime.InferenceSession) -> None:
        self._session = session
        self._run_options = onnxruntime.RunOptions()
        self._run_options.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")

    def run(self, output_names: list[str] | None, input_feed: dict[str, np.ndarray],
            run_options: onnxruntime.RunOptions | None = None) -> list[np.ndarray]:
        return self._session.run(output_names, input_feed, run_options or self._run_options)

    def get_outputs(self) -> list[onnxruntime.NodeArg]:
        return self._session.get_outputs()


def _timings(chunk: object, samples: int) -> tuple[tuple[str, int], ...] | None:
    """(phoneme, samples) pairs of a piper chunk; the last one absorbs any rounding difference."""
    aligned = getattr(chunk, "phoneme_alignments", None)
    if not aligned:
        return None
    pairs = [(a.phoneme, int(a.num_samples)) for a in aligned]
    missing = samples - sum(n for _, n in pairs)
    if missing:
        phoneme, n = pairs[-1]
        pairs[-1] = (phoneme, max(0, n + missing))
    return tuple(pairs)


class PiperTts:
    """TtsEngine: `synthesize(text)` yields int16 mono chunks at the voice's sample rate."""

    # piper serialises its espeak-ng phonemizer (a lock in piper.voice); the vocoder is one
    # onnxruntime session, which takes concurrent runs: one voice serves every TTS worker.
    thread_safe = True

    def __init__(self, onnx: Path | str, json_config: Path | str, length_scale: float = 1.0,
                 num_threads: int = 1) -> None:
        onnx, json_config = Path(onnx), Path(json_config)
        for p in (onnx, json_config):
            if not p.is_file():
                raise ModelError(f"Piper voice file not found: {p}")
        try:
            config = PiperConfig.from_dict(json.loads(json_config.read_text(encoding="utf-8")))
            self._voice = PiperVoice(session=ShrinkingSession(_session(onnx, num_threads)),  # type: ignore[arg-type]
                                     config=config,
                                     espeak_data_dir=espeak_data_dir())
        except Exception as exc:  # vendor boundary: onnxruntime errors derive from Exception
            raise ModelError(f"cannot load the Piper voice {onnx}: {exc}") from exc
        self.sample_rate: int = config.sample_rate
        self.model_path: Path = onnx  # which of the voice's files runs (tts.conv2d, the aligned one...)
        self.length_scale = length_scale
        self._syn = SynthesisConfig(length_scale=length_scale)
        # An aligned voice (model store step `piper-alignment`) has a second output: per-phoneme
        # sample counts. Then every chunk carries its phoneme timings (for visemes).
        self.has_alignments: bool = len(self._voice.session.get_outputs()) > 1
        # The first run initialises espeak-ng and onnxruntime buffers: pay it at load.
        for _ in self.synthesize("Hello."):
            pass

    def steady(self) -> PiperTts:
        """The same voice (the same loaded session) without its sampling noise: a text gives the same
        audio every time (piper otherwise varies its durations and sound a little from run to run).
        Speech made as test or benchmark input that must not differ between runs."""
        voice = copy.copy(self)
        voice._syn = SynthesisConfig(length_scale=self.length_scale, noise_scale=0.0, noise_w_scale=0.0)
        return voice

    def synthesize(self, text: str) -> Iterator[SynthChunk]:
        if not text.strip():
            return
        produced = False
        pieces = iter(self._voice.synthesize(text, syn_config=self._syn,
                                             include_alignments=self.has_alignments))
        while True:
            try:
                chunk = next(pieces, None)
            except Exception as exc:  # vendor boundary, see above
                raise TtsError(f"Piper failed on {text[:40]!r}: {exc}") from exc
            if chunk is None:
                break
            pcm = chunk.audio_int16_array
            if pcm.size:
                produced = True
                yield SynthChunk(pcm=pcm, sample_rate=chunk.sample_rate, phonemes=_timings(chunk, pcm.size))
        if not produced:  # e.g. text of punctuation only: keep "at least one chunk"
            silence = np.zeros(self.sample_rate * _EMPTY_SENTENCE_MS // 1000, dtype=np.int16)
            yield SynthChunk(pcm=silence, sample_rate=self.sample_rate)

    def synthesize_float(self, text: str) -> tuple[np.ndarray, int]:
        """All of `text` as one float32 array in [-1, 1], and its sample rate (for tools)."""
        pcm = [c.pcm for c in self.synthesize(text)]
        audio = np.concatenate(pcm) if pcm else np.zeros(0, np.int16)
        return audio.astype(np.float32) / 32768.0, self.sample_rate
