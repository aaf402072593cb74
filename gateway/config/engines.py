"""The model sections of `gateway.yaml`: `vad`, `asr`, `tts` and `engines` (how many calls of each
engine run at once). Every key is documented in docs/CONFIG.md."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator

from gateway.config.base import _Section


class VadConfig(_Section):
    model: str = "silero-vad"
    threshold: float = Field(0.5, gt=0, lt=1)
    min_speech_ms: int = Field(150, ge=30, le=2000)
    trailing_silence_ms: int = Field(500, ge=100, le=5000)
    speculative_after_ms: int = Field(120, ge=0, le=5000)
    max_utterance_s: float = Field(20.0, ge=1, le=120)
    preroll_ms: int = Field(300, ge=0, le=2000)
    barge_in: bool = True
    relative_drop_db: float = Field(8.0, ge=0, le=40)  # 0 = off (gateway/voice/endpointing.py); 8 measured

    @model_validator(mode="after")
    def _speculation_before_endpoint(self) -> "VadConfig":
        if self.speculative_after_ms > self.trailing_silence_ms:
            raise ValueError(
                f"speculative_after_ms ({self.speculative_after_ms}) must not exceed "
                f"trailing_silence_ms ({self.trailing_silence_ms})"
            )
        return self


_ASR_FILES: dict[str, tuple[str, ...]] = {
    "moonshine": (),  # files come from the model manifest (asr.model)
    "moonshine-sherpa": (),
    "whisper": (),  # a CTranslate2 Whisper model of the manifest (asr.model)
    "transducer": ("encoder", "decoder", "joiner", "tokens"),
    "paraformer": ("encoder", "decoder", "tokens"),  # streaming paraformer
}


_ASR_DEFAULT_MODEL = {"whisper": "whisper-tiny-en"}  # asr.model when not given; else moonshine-base-en
# The engines that can run each model of the shipped manifest (models/manifest.yaml): a Moonshine model
# has no CTranslate2 files for whisper, a Whisper model no encoder/decoder/tokens for moonshine
# (gateway/engines/factory.py). A model added to the manifest by name is not known here: it is checked
# when it loads.
_ASR_MODEL_ENGINES: dict[str, tuple[str, ...]] = {
    "moonshine-base-en": ("moonshine", "moonshine-sherpa"),
    "whisper-tiny-en": ("whisper",),
}


class AsrConfig(_Section):
    engine: Literal["moonshine", "moonshine-sherpa", "whisper", "transducer", "paraformer"] = "moonshine"
    model: str = "moonshine-base-en"  # the default depends on the engine (_ASR_DEFAULT_MODEL)
    num_threads: int = Field(2, ge=1, le=16)
    # moonshine: which decoder runs: the derived int8-weight one (int8), the derived float one
    # (float, ~+100 MB), or the packaged one (packaged: dequantizes at every step, slow)
    moonshine_decoder: Literal["int8", "float", "packaged"] = "int8"
    beam_size: int = Field(1, ge=1, le=10)  # moonshine and whisper: 1 = greedy, more = beam search
    # moonshine only: decode again with Whisper tiny.en when Moonshine is unsure (empty, looped, or
    # mean token log-probability below second_opinion_below), keep the surer transcript
    # (gateway/engines/asr_second_opinion.py)
    second_opinion: Literal["none", "whisper"] = "none"
    second_opinion_below: float = Field(-0.5, ge=-10.0, le=0.0)
    # which transcript the second opinion keeps: the surer by its own model (own), or the best
    # weighted score of both models of every candidate (cross, asr_cross.py; cross_score sum | mean)
    second_opinion_choice: Literal["own", "cross"] = "own"
    cross_weight: float = Field(0.5, ge=0.0, le=1.0)
    cross_score: Literal["sum", "mean"] = "sum"
    # whisper only (gateway/engines/whisper_ct2.py):
    language: str = Field("en", pattern=r"^[a-z]{2,3}$")  # a Whisper language code; .en models: en
    compute_type: Literal["int8", "int8_float32", "int16", "float32"] = "int8"
    window: Literal["10s", "30s"] = "10s"  # the encoder's input: >= 10 s (3x less work), or Whisper's 30 s
    # For engine: transducer / paraformer (streaming sherpa-onnx models you download yourself):
    encoder: Path | None = None
    decoder: Path | None = None
    joiner: Path | None = None
    tokens: Path | None = None

    @model_validator(mode="before")
    @classmethod
    def _model_of_engine(cls, data: Any) -> Any:
        engine = data.get("engine") if isinstance(data, dict) else None
        if isinstance(engine, str) and data.get("model") is None and engine in _ASR_DEFAULT_MODEL:
            return {**data, "model": _ASR_DEFAULT_MODEL[engine]}
        return data  # a list or mapping as the engine: refused below as not one of the engines

    @model_validator(mode="after")
    def _model_of_its_engine(self) -> "AsrConfig":
        engines = _ASR_MODEL_ENGINES.get(self.model)
        if engines is not None and self.engine not in engines and self.engine in ("moonshine", "moonshine-sherpa",
                                                                                   "whisper"):
            own = _ASR_DEFAULT_MODEL.get(self.engine, "moonshine-base-en")
            raise ValueError(f"engine {self.engine!r} cannot run model {self.model!r} (a model for engine "
                             f"{' or '.join(engines)}): leave asr.model out for the engine's own ({own}), "
                             f"or set asr.engine: {engines[0]}")
        return self

    @model_validator(mode="after")
    def _second_opinion_of_moonshine(self) -> "AsrConfig":
        if self.second_opinion != "none" and self.engine != "moonshine":
            raise ValueError(f"second_opinion {self.second_opinion!r} needs engine moonshine (the engine it "
                             f"double-checks), not {self.engine!r}: set second_opinion: none")
        if self.second_opinion_choice == "cross" and self.second_opinion == "none":
            raise ValueError("second_opinion_choice 'cross' needs a second opinion to choose with "
                             "(second_opinion: whisper)")
        return self

    def second_opinion_asr(self) -> "AsrConfig | None":
        """The engine that double-checks this one (asr.second_opinion), or None."""
        if self.second_opinion != "whisper":
            return None
        return AsrConfig(engine="whisper", num_threads=self.num_threads, compute_type=self.compute_type,
                         window=self.window)

    def models(self) -> set[str]:
        """The manifest models this ASR runs (the downloaded transducer / paraformer files are none)."""
        own = {self.model} if self.engine in ("moonshine", "moonshine-sherpa", "whisper") else set()
        second = self.second_opinion_asr()
        return own | (second.models() if second else set())

    @model_validator(mode="after")
    def _files_match_engine(self) -> "AsrConfig":
        needed = set(_ASR_FILES[self.engine])
        given = {name for name in ("encoder", "decoder", "joiner", "tokens") if getattr(self, name) is not None}
        if extra := sorted(given - needed):
            raise ValueError(
                f"engine {self.engine!r} does not use {', '.join(extra)} (remove it or change the engine)"
            )
        if missing := sorted(needed - given):
            raise ValueError(f"engine {self.engine!r} needs {', '.join(missing)} (the path of the model's file)")
        return self


class TtsConfig(_Section):
    engine: Literal["piper"] = "piper"
    voice: str = "piper-joe-medium"
    length_scale: float = Field(1.0, gt=0.3, le=3.0)
    num_threads: int = Field(2, ge=1, le=16)
    # The voice with its 1-D convolutions run as 2-D ones, when the manifest derives one
    # (gateway/engines/piper_conv2d.py): less CPU per second of speech, the same audio. `auto`: on
    # where it was measured to pay off (x86-64 with AVX2, gateway/engines/cpu_features.py).
    conv2d: bool | Literal["auto"] = "auto"
    # Seconds of synthesized audio kept for texts said again (gateway/engines/tts_cache.py; ~2.6 MB
    # per minute at the voice's 22.05 kHz); 0 = synthesize every text.
    cache_seconds: float = Field(60.0, ge=0.0, le=3600.0)


class EnginesConfig(_Section):
    """How many calls of each engine run at once (gateway/engines/runner.py)."""

    asr_workers: int = Field(0, ge=0, le=64)  # 0: one per CPU core (os.cpu_count())
    tts_workers: int = Field(0, ge=0, le=64)
    max_waiting_turns: int = Field(32, ge=1, le=10000)
