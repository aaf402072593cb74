"""The schema of `models/manifest.yaml`: every model, where its files come from, their sha256."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from gateway.errors import ModelError


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ModelSource(_Strict):
    package: str  # PyPI distribution name
    version: str  # accepted range, e.g. ">=6,<7"
    tested_version: str
    module: str  # import name of the package holding the files
    path: str = ""  # folder inside the package


class ModelFile(_Strict):
    name: str
    role: str
    package_file: str | None = None
    derive: Literal["moonshine-tokens", "moonshine-float-decoder", "moonshine-int8-decoder",
                     "moonshine-int8-qgemm-decoder", "piper-alignment", "piper-conv2d", "minilm-gather-int8",
                     "minilm-int8"] | None = None
    derived_from: str | None = None
    size: int = Field(ge=0)
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    # A derived speed-up the engine can do without: when deriving it gives other bytes (other
    # library versions), it is skipped with a warning instead of failing the whole model.
    optional: bool = False

    @model_validator(mode="after")
    def _one_origin(self) -> "ModelFile":
        if (self.package_file is None) == (self.derive is None):
            raise ValueError("give exactly one of package_file or derive")
        if self.derive is not None and self.derived_from is None:
            raise ValueError("derive needs derived_from")
        return self


class ModelEntry(_Strict):
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9.-]*$")
    kind: Literal["vad", "asr", "tts", "embedding"]
    description: str
    homepage: str
    licence: dict[str, str]
    source: ModelSource
    files: tuple[ModelFile, ...]


class Manifest(_Strict):
    version: Literal[1]
    models: tuple[ModelEntry, ...]


def load_manifest(path: Path) -> Manifest:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        return Manifest.model_validate(data)
    except (OSError, yaml.YAMLError, ValidationError) as exc:
        raise ModelError(f"the model manifest {path} is unreadable or invalid: {exc}") from None
