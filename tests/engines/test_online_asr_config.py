"""OnlineAsr (streaming transducer/paraformer): no model files here, so only the checks that
run before sherpa-onnx is asked to load anything."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.engines.sherpa_asr import OnlineAsr
from gateway.errors import ModelError


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    paths = {k: tmp_path / f"{k}.onnx" for k in ("encoder", "decoder", "joiner")}
    paths["tokens"] = tmp_path / "tokens.txt"
    return paths


def test_transducer_without_a_joiner_names_the_missing_key(files: dict[str, Path]) -> None:
    with pytest.raises(ModelError, match=r"missing joiner \(set asr.joiner"):
        OnlineAsr("transducer", encoder=files["encoder"], decoder=files["decoder"],
                  tokens=files["tokens"])


def test_nothing_configured_lists_every_missing_key(files: dict[str, Path]) -> None:
    with pytest.raises(ModelError, match="missing encoder, decoder, joiner, tokens"):
        OnlineAsr("transducer", encoder=None, decoder=None, tokens=None)


def test_paraformer_rejects_a_joiner(files: dict[str, Path]) -> None:
    with pytest.raises(ModelError, match="only for engine: transducer"):
        OnlineAsr("paraformer", encoder=files["encoder"], decoder=files["decoder"],
                  tokens=files["tokens"], joiner=files["joiner"])


def test_a_configured_file_that_does_not_exist_is_named(files: dict[str, Path]) -> None:
    with pytest.raises(ModelError, match=r"asr.encoder = .*encoder.onnx does not exist"):
        OnlineAsr("paraformer", encoder=files["encoder"], decoder=files["decoder"],
                  tokens=files["tokens"])


def test_an_unknown_online_engine_is_refused(files: dict[str, Path]) -> None:
    with pytest.raises(ModelError, match="transducer or paraformer"):
        OnlineAsr("whisper", encoder=files["encoder"], decoder=files["decoder"],  # type: ignore[arg-type]
                  tokens=files["tokens"])
