"""The PostgreSQL DSN: read from the environment variable `storage.dsn_env` names, never from gateway.yaml."""

from __future__ import annotations

from collections.abc import Mapping

from gateway.config.storage import StorageConfig
from gateway.errors import ConfigError


def postgres_dsn(storage: StorageConfig, environ: Mapping[str, str]) -> str:
    """The DSN for `storage.backend: postgres`; a ConfigError naming the variable when it is unset."""
    dsn = environ.get(storage.dsn_env, "").strip()
    if not dsn:
        raise ConfigError(
            f"storage.backend is postgres but the environment variable {storage.dsn_env} (storage.dsn_env) "
            "is not set: export it, e.g. postgresql://gateway:secret@db.lan:5432/gateway"
        )
    return dsn
