"""Shared fixtures for the engine tests: a prepared model store in a temporary models dir and
speech synthesized by the real Piper voice (no recordings, no mocks)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gateway.config import GatewayConfig, parse_config
from gateway.engines.store import ModelStore

REPO = Path(__file__).resolve().parents[2]
MANIFEST = REPO / "models" / "manifest.yaml"


EXTRACTED = REPO / "models" / "packages"  # where the set-up puts files of packages this platform lacks


def _make_config(models_dir: Path, manifest: Path = MANIFEST, **sections: Any) -> GatewayConfig:
    # On aarch64 the Moonshine files come from the x86-64 wheel, extracted by ./quickstart into
    # models/packages (tools/fetch-wheel-models): a temp models dir sees them there too.
    if EXTRACTED.is_dir() and not (models_dir / "packages").exists():
        models_dir.mkdir(parents=True, exist_ok=True)
        (models_dir / "packages").symlink_to(EXTRACTED, target_is_directory=True)
    data = {"models": {"dir": str(models_dir), "manifest": str(manifest)}, **sections}
    return parse_config(data, REPO)


MakeConfig = Callable[..., GatewayConfig]


@pytest.fixture(scope="session")
def make_config() -> MakeConfig:
    """make_config(models_dir, manifest=..., **sections) -> a GatewayConfig for that models dir."""
    return _make_config


@pytest.fixture(scope="session")
def manifest_path() -> Path:
    return MANIFEST


@pytest.fixture(scope="session")
def prepared_cfg(tmp_path_factory: pytest.TempPathFactory) -> GatewayConfig:
    """A config whose models dir (a temp dir) has every model prepared."""
    cfg = _make_config(tmp_path_factory.mktemp("models"))
    ModelStore(cfg).prepare()
    return cfg


@pytest.fixture(scope="session")
def store(prepared_cfg: GatewayConfig) -> ModelStore:
    return ModelStore(prepared_cfg)


@pytest.fixture(scope="session")
def speech16k(prepared_cfg: GatewayConfig) -> Iterator[Callable[[str], np.ndarray]]:
    """speech16k(text) -> 16 kHz float32 speech from the real Piper voice (loaded once), the same in
    every run (piper's sampling noise off: with it, whisper once heard "good morning good morning")."""
    import soxr

    from gateway.engines.piper_tts import PiperTts

    files = ModelStore(prepared_cfg).files_of("piper-joe-medium")
    tts = PiperTts(files["model"], files["config"]).steady()  # the same audio in every run

    def speech16k(text: str) -> np.ndarray:
        pcm = np.concatenate([c.pcm for c in tts.synthesize(text)])
        return soxr.resample(pcm.astype(np.float32) / 32768.0, tts.sample_rate, 16000).astype(np.float32)

    yield speech16k
