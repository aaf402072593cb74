"""Moonshine ASR on onnxruntime directly, without a memory arena (`asr.engine: moonshine`).

The same model files and the same words as sherpa-onnx's Moonshine (`moonshine-sherpa`), in far
less memory. The packaged merged decoder (`decoder_model_merged.ort`) dequantizes all its uint8
weights at every decoding step: over 200 MB of scratch memory and most of the step's time.
sherpa-onnx keeps that scratch in onnxruntime's arena, so the gateway then holds ~800 MB. The
model store derives `decoder_model_float.onnx` (gateway/engines/moonshine_fold.py) with the
weights dequantized once (+150 MB resident), and this engine runs it as it is: the derived graph
is already onnxruntime's optimized one, so no further graph rewrites and no weight prepacking
(either would change float summation order, and prepacking would hold a second copy of the
weights). Its logits are bit-identical to the packaged decoder's, ~3.5x faster. Given the `.ort`
decoder instead, it still works, without an arena (scratch given back after every step, page
faults at every step; `GLIBC_TUNABLES=glibc.malloc.hugetlb=1` keeps that cost small).
Measured figures: README, Benchmarks.

Decoding: encoder once, then the merged decoder one token at a time with its key/value cache
(step 0 runs the no-cache branch and yields the cross-attention cache; later steps update only
the self-attention cache, as sherpa-onnx does), greedy (`asr.beam_size` 1) or a beam search of
that width, the beams one batch per step (gateway/engines/moonshine_beam.py; the self-attention
cache reordered by the beams' parents). It stops at EOS, at the length bound, or when the output
starts repeating itself (gateway/engines/decode_loop.py), keeping one copy. `transcribe_scored`
also gives the transcript's mean token log-probability (gateway/engines/asr_confidence.py);
`hear` gives every finished beam and keeps the encoder's output to score any text on it by
teacher forcing (the decoder's no-cache branch over the text's tokens, gateway/engines/
moonshine_tokenizer.py), for the cross-scored second opinion (gateway/engines/asr_cross.py).
The decoder loop runs in Python, so a cancelled call (the runner sets its `cancel` token when nobody
waits for the result: a speculative decode the speech went on after, a barge-in) stops after the
encoder or the decoder step it is in and raises `DecodeCancelled`; `decoder_steps` counts the
steps every call ran (benchmarks, tests).
"""

from __future__ import annotations

import base64
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import onnxruntime

from gateway.engines.base import DecodeCancelled
from gateway.engines.asr_confidence import Hearing, ScoredTranscript, TextScore
from gateway.engines.moonshine_beam import Hypothesis, log_softmax, n_best
from gateway.engines.moonshine_tokenizer import MoonshineTokenizer
from gateway.engines.sherpa_asr import SAMPLE_RATE, _as_input, _require_files, clean_transcript
from gateway.errors import AsrError, ModelError

BOS, EOS = 1, 2
TOKENS_PER_SECOND = 6.5  # Moonshine's own bound on output length per second of audio
_MIN_SAMPLES = 160


def _session(path: Path, num_threads: int, prepack: bool = False) -> onnxruntime.InferenceSession:
    opts = onnxruntime.SessionOptions()
    opts.intra_op_num_threads = num_threads
    opts.inter_op_num_threads = 1
    opts.enable_cpu_mem_arena = False  # the point of this engine: give scratch memory back
    # No spin-waiting between operators: the ASR workers share the cores with each other, the TTS
    # and the VAD; a spinning thread burns a core another call needs (measured on the busy 2-core
    # VM: ~0.9 s CPU and wall per decode of a 3 s question with spinning, ~0.45 s without).
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    if path.suffix == ".onnx":  # a derived decoder: run exactly the graph it holds
        opts.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
        if not prepack:  # prepacking float weights would hold a second copy of them
            opts.add_session_config_entry("session.disable_prepacking", "1")
    opts.log_severity_level = 3
    return onnxruntime.InferenceSession(str(path), sess_options=opts, providers=["CPUExecutionProvider"])


def _read_tokens(path: Path) -> list[bytes]:
    """tokens.txt as written by the model store: `base64(token) index` per line."""
    tokens: list[bytes] = []
    for line in path.read_text(encoding="ascii").splitlines():
        parts = line.split()
        tokens.append(base64.b64decode(parts[0]) if len(parts) == 2 else b"")
    return tokens


class MoonshineOnnxAsr:
    """AsrEngine for Moonshine (base-en) run by onnxruntime without a memory arena."""

    sample_rate = SAMPLE_RATE
    thread_safe = True  # onnxruntime sessions take concurrent runs; the decoding state is per call

    def __init__(self, encoder: Path | str, decoder: Path | str, tokens: Path | str, num_threads: int = 2,
                 int8_decoder: bool = False, beam_size: int = 1) -> None:
        """`int8_decoder`: `decoder` is the derived int8-weight one (moonshine_nbits.py), whose
        integer kernels run on weights onnxruntime prepacks at load. `beam_size` 1: greedy."""
        if beam_size < 1:
            raise ModelError(f"Moonshine beam_size must be >= 1, not {beam_size}")
        self._beam = beam_size
        files = _require_files(encoder=Path(encoder), decoder=Path(decoder), tokens=Path(tokens))
        try:
            self._enc = _session(files["encoder"], num_threads)
            self._dec = _session(files["decoder"], num_threads, prepack=int8_decoder)
        except Exception as exc:  # onnxruntime raises its own exception types
            raise ModelError(f"cannot load Moonshine from {files['encoder'].parent}: {exc}") from exc
        self._tokens = _read_tokens(files["tokens"])
        self._tokenizer = MoonshineTokenizer(self._tokens)
        self._enc_input = self._enc.get_inputs()[0].name
        inputs = self._dec.get_inputs()
        self._past = [i.name for i in inputs if i.name.startswith("past_key_values.")]
        heads, dim = inputs[2].shape[1], inputs[2].shape[3]
        self._empty = np.zeros((1, heads, 0, dim), np.float32)
        self._logits, *self._present = [o.name for o in self._dec.get_outputs()]
        self._count_lock = threading.Lock()
        self.decoder_steps = 0  # decoder steps run by all calls so far (the warm-up's included)
        self.transcribe(np.sin(np.linspace(0, 2000, SAMPLE_RATE)).astype(np.float32) * 0.1)  # warm-up

    def transcribe(self, audio: np.ndarray, cancel: threading.Event | None = None) -> str:
        return self.transcribe_scored(audio, cancel).text

    def transcribe_scored(self, audio: np.ndarray, cancel: threading.Event | None = None) -> ScoredTranscript:
        return self.hear(audio, cancel).candidates[0]

    def hear(self, audio: np.ndarray, cancel: threading.Event | None = None) -> Hearing:
        """The utterance's finished beams (best first; greedy: one), and a scorer of any text on its
        encoding: the decoder run once over each text's tokens (`_teacher_forced`)."""
        samples = _as_input(audio)
        if samples.size < _MIN_SAMPLES:
            return Hearing((ScoredTranscript("", 0.0),), lambda texts: [TextScore(0.0, 0) for _ in texts])
        try:
            hidden, found = self._decode(samples, cancel)
        except DecodeCancelled:
            raise
        except Exception as exc:  # onnxruntime errors carry their own types
            raise AsrError(f"Moonshine decoding failed: {exc}") from exc
        return Hearing(tuple(self._scored(h) for h in found), lambda texts: self._teacher_forced(hidden, texts))

    def _scored(self, best: Hypothesis) -> ScoredTranscript:
        text = b"".join(self._tokens[i] for i in best.ids if i < len(self._tokens)).decode("utf-8", "replace")
        return ScoredTranscript(clean_transcript(text.replace("\u2581", " ")), best.mean_logprob, best.looped)

    def _teacher_forced(self, hidden: np.ndarray, texts: Sequence[str]) -> list[TextScore]:
        """Each text's token log-probabilities (EOS included) given the encoder's `hidden`: the
        decoder's no-cache branch run once over all of them, right-padded (its self-attention is
        causal, so a position never sees the padding after it)."""
        sequences = [self._tokenizer.encode(t.strip()) for t in texts]
        if not sequences:
            return []
        width = max(len(s) for s in sequences) + 1
        ids = np.full((len(sequences), width), EOS, np.int64)
        for row, seq in enumerate(sequences):
            ids[row, 0] = BOS
            ids[row, 1 : len(seq) + 1] = seq
        empty = np.zeros((len(sequences), *self._empty.shape[1:]), np.float32)
        try:
            feeds = {"input_ids": ids, "encoder_hidden_states": np.repeat(hidden, len(sequences), 0),
                     **{name: empty for name in self._past}, "use_cache_branch": np.array([False])}
            logits = self._dec.run([self._logits], feeds)[0]
        except Exception as exc:  # onnxruntime errors carry their own types
            raise AsrError(f"Moonshine scoring failed: {exc}") from exc
        scores: list[TextScore] = []
        for row, seq in enumerate(sequences):
            targets = np.array(seq + [EOS], np.int64)
            logprobs = log_softmax(logits[row, : targets.size].astype(np.float32))
            scores.append(TextScore(float(logprobs[np.arange(targets.size), targets].sum()), int(targets.size)))
        return scores

    def _decode(self, samples: np.ndarray, cancel: threading.Event | None) -> tuple[np.ndarray, list[Hypothesis]]:
        steps = 0
        if cancel is not None and cancel.is_set():  # cancelled before it started
            raise DecodeCancelled(0)
        try:
            hidden = encoded = self._enc.run(None, {self._enc_input: samples[None, :]})[0]
            cache = {name: self._empty for name in self._past}

            def step(tokens: np.ndarray, parents: np.ndarray | None) -> np.ndarray:
                nonlocal steps, hidden
                steps += 1
                if parents is not None:  # a beam search reorders, drops or repeats its beams
                    same = parents.size == hidden.shape[0] and bool((parents == np.arange(parents.size)).all())
                    if not same:
                        for name, value in cache.items():
                            if ".decoder." in name:  # the self-attention cache: one per beam
                                cache[name] = value[parents]
                            elif value.shape[0] != parents.size:  # cross-attention: the same for every beam
                                cache[name] = np.repeat(value[:1], parents.size, axis=0)
                        if hidden.shape[0] != parents.size:
                            hidden = np.repeat(hidden[:1], parents.size, axis=0)
                result = self._dec.run(None, {"input_ids": tokens[:, None], "encoder_hidden_states": hidden, **cache,
                                              "use_cache_branch": np.array([parents is not None])})
                for name, value in zip(self._present, result[1:]):
                    if parents is None or ".decoder." in name:  # the cross-attention cache is made once
                        cache[name.replace("present.", "past_key_values.", 1)] = value
                return log_softmax(result[0][:, -1])

            max_tokens = int(samples.size / SAMPLE_RATE * TOKENS_PER_SECOND) + 4
            try:
                return encoded, n_best(step, BOS, EOS, self._beam, max_tokens, cancel)
            except DecodeCancelled:
                raise DecodeCancelled(steps) from None
        finally:
            with self._count_lock:
                self.decoder_steps += steps
