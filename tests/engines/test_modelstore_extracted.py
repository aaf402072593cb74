"""ModelStore fallback: a package that is not installed (moonshine-cpp on aarch64) may have its
files extracted under <models.dir>/packages/<module>/<path>/ (tools/fetch-wheel-models)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import yaml

from gateway.errors import ModelError
from gateway.engines.store import ModelStore

DATA = b"not really an onnx graph\n"


def _manifest(tmp_path: Path, sha256: str) -> Path:
    entry = {
        "name": "fake-asr", "kind": "asr", "description": "test", "homepage": "https://example.invalid",
        "licence": {"model": "MIT"},
        "source": {"package": "fake-wheel-only", "version": ">=1,<2", "tested_version": "1.0.0",
                   "module": "fake_wheel_only_xyz", "path": "models/base"},
        "files": [{"name": "model.ort", "role": "encoder", "package_file": "model.ort",
                   "size": len(DATA), "sha256": sha256}],
    }
    path = tmp_path / "manifest.yaml"
    path.write_text(yaml.safe_dump({"version": 1, "models": [entry]}))
    return path


def _models_dir(tmp_path: Path) -> Path:
    """A models dir with a packages/ of its own: where ./quickstart extracted files (aarch64),
    make_config would link packages/ to the checkout's, and the fake files would land there."""
    (tmp_path / "models" / "packages").mkdir(parents=True)
    return tmp_path / "models"


def test_files_extracted_under_models_packages_are_used_when_the_package_is_not_installed(
        tmp_path: Path, make_config) -> None:
    store = ModelStore(make_config(_models_dir(tmp_path), manifest=_manifest(tmp_path, hashlib.sha256(DATA).hexdigest())))
    with pytest.raises(ModelError, match=r"fake-wheel-only>=1,<2'.*packages/fake_wheel_only_xyz/models/base"):
        store.prepare("fake-asr")
    extracted = tmp_path / "models" / "packages" / "fake_wheel_only_xyz" / "models" / "base"
    extracted.mkdir(parents=True)
    (extracted / "model.ort").write_bytes(DATA)
    lines: list[str] = []
    folder = store.prepare("fake-asr", lines.append)
    assert (folder / "model.ort").resolve() == (extracted / "model.ort").resolve()
    assert any(f"from {extracted}" in line for line in lines)
    assert store.is_prepared("fake-asr") and store.verify("fake-asr") == []


def test_extracted_files_are_checked_against_the_manifest(tmp_path: Path, make_config) -> None:
    store = ModelStore(make_config(_models_dir(tmp_path), manifest=_manifest(tmp_path, "0" * 64)))
    extracted = tmp_path / "models" / "packages" / "fake_wheel_only_xyz" / "models" / "base"
    extracted.mkdir(parents=True)
    (extracted / "model.ort").write_bytes(DATA)
    with pytest.raises(ModelError, match="the manifest expects 0000"):
        store.prepare("fake-asr")
    assert not store.is_prepared("fake-asr")
