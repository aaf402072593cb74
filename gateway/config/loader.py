"""Reading `gateway.yaml`: `${ENV}` expansion, validation into `GatewayConfig`, errors naming the key."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from gateway.config.messages import describe
from gateway.config.sections import GatewayConfig
from gateway.config.yaml_file import parse_yaml
from gateway.errors import ConfigError

_ENV = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def _expand_env(value: Any, where: str) -> Any:
    if isinstance(value, dict):
        return {k: _expand_env(v, f"{where}.{k}" if where else str(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [_expand_env(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, str):

        def sub(m: re.Match[str]) -> str:
            name, default = m.group(1), m.group(2)
            if name in os.environ:
                return os.environ[name]
            if default is not None:
                return default
            raise ConfigError(
                f"{where} = {value!r}: environment variable {name} is not set "
                f"(export it, or write ${{{name}:-default}})"
            )

        return _ENV.sub(sub, value)
    return value


def parse_config(
    data: dict[str, Any] | None, base_dir: Path = Path("."), *, source: str | None = None
) -> GatewayConfig:
    """Validate a config mapping. Raises ConfigError naming every bad key, value and what is allowed.

    `source` (e.g. the file name) is only used in error messages.
    """
    where = f"config error in {source}" if source else "config error"
    try:
        data = _expand_env(data or {}, "")
    except ConfigError as exc:
        raise ConfigError(f"{where}:\n  {exc.text}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: the top level must be a mapping of sections (server:, vad:, ...)")
    if "base_dir" in data:
        # base_dir is set by the loader (the config file's directory), never by the file itself.
        raise ConfigError(f"{where}:\n  base_dir: unknown key (paths are relative to the config file)")
    # A section whose keys are all commented out parses as None: it means "all defaults".
    data = {key: value for key, value in data.items() if value is not None}
    try:
        return GatewayConfig.model_validate({**data, "base_dir": base_dir})
    except ValidationError as exc:
        lines = list(dict.fromkeys(describe(e, GatewayConfig) for e in exc.errors()))
        raise ConfigError(f"{where}:\n  " + "\n  ".join(lines)) from None


def load_config(path: Path | None) -> GatewayConfig:
    """Load `path` (or embedded defaults when None)."""
    if path is None:
        return parse_config({}, Path.cwd())
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"config error: cannot read {path}: {exc.strerror}") from None
    data = parse_yaml(text, str(path))
    return parse_config(data, path.resolve().parent, source=str(path))
