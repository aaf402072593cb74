"""Both Moonshine engines (onnxruntime without arena, the default, and sherpa-onnx) transcribe speech
synthesized by the real Piper voice back to the same words."""

from __future__ import annotations

import re

import numpy as np
import pytest

from gateway.config import GatewayConfig
from gateway.engines.moonshine_ort import MoonshineOnnxAsr
from gateway.engines.sherpa_asr import MoonshineAsr, clean_transcript
from gateway.errors import AsrError, ModelError
from gateway.engines.store import ModelStore

pytestmark = pytest.mark.models


@pytest.fixture(scope="module", params=[MoonshineOnnxAsr, MoonshineAsr], ids=["onnxruntime", "sherpa-onnx"])
def asr(request, prepared_cfg: GatewayConfig) -> MoonshineAsr:
    files = ModelStore(prepared_cfg).files_of("moonshine-base-en")
    decoder = files.get("decoder_float", files["decoder"]) if request.param is MoonshineOnnxAsr else files["decoder"]
    return request.param(files["encoder"], decoder, files["tokens"], num_threads=2)


def _words(text: str) -> list[str]:
    return re.sub(r"[^a-z0-9' ]", " ", text.lower()).split()


def test_synthesized_question_is_transcribed_to_the_same_words(asr: MoonshineAsr, speech16k) -> None:
    text = asr.transcribe(speech16k("What time is it?"))
    assert _words(text) == ["what", "time", "is", "it"]


def test_int16_audio_is_accepted_like_float32(asr: MoonshineAsr, speech16k) -> None:
    audio = speech16k("What time is it?")
    pcm = (audio * 32767).astype(np.int16)
    assert _words(asr.transcribe(pcm)) == ["what", "time", "is", "it"]


def test_empty_or_tiny_audio_gives_empty_text_without_running_the_model(asr: MoonshineAsr) -> None:
    assert asr.transcribe(np.zeros(0, np.float32)) == ""
    assert asr.transcribe(np.zeros(100, np.float32)) == ""


def test_silence_gives_empty_text(asr: MoonshineAsr) -> None:
    assert asr.transcribe(np.zeros(16000, np.float32)) == ""


def test_stereo_input_is_rejected_with_an_asr_error(asr: MoonshineAsr) -> None:
    with pytest.raises(AsrError, match="mono"):
        asr.transcribe(np.zeros((2, 16000), np.float32))


@pytest.mark.parametrize(
    ("raw", "clean"),
    [("\"'What is the time?", "What is the time?"), ("  hello  ", "hello"), ("'ok'", "ok"), ("\"", "")],
)
def test_stray_quotes_and_whitespace_are_stripped(raw: str, clean: str) -> None:
    assert clean_transcript(raw) == clean


def test_missing_model_files_are_a_model_error(tmp_path) -> None:
    with pytest.raises(ModelError, match="does not exist"):
        MoonshineAsr(tmp_path / "e.ort", tmp_path / "d.ort", tmp_path / "tokens.txt")


@pytest.fixture(scope="module")
def both_engines(prepared_cfg: GatewayConfig) -> tuple[MoonshineOnnxAsr, MoonshineAsr]:
    files = ModelStore(prepared_cfg).files_of("moonshine-base-en")
    return (MoonshineOnnxAsr(files["encoder"], files.get("decoder_float", files["decoder"]), files["tokens"]),
            MoonshineAsr(files["encoder"], files["decoder"], files["tokens"]))


@pytest.mark.parametrize(
    "sentence",
    ["Please turn on the kitchen light.", "My blood pressure was one hundred and twenty over eighty.",
     "Good morning, how did you sleep?"],
)
def test_the_default_engine_hears_the_same_words_as_sherpa_onnx(both_engines, speech16k, sentence: str) -> None:
    audio = speech16k(sentence)
    ours, theirs = (engine.transcribe(audio) for engine in both_engines)
    assert _words(ours) == _words(theirs)
    assert len(_words(ours)) >= 4
