"""Where the gateway keeps its state: `devices` (the device registry and readings, their limits)
and `storage` (the embedded SQLite files or one PostgreSQL). See docs/CONFIG.md.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator

from gateway.config.base import _Section


class DevicesConfig(_Section):
    database: Path = Path("data/gateway.db")
    open_enrolment: bool = True
    max_readings_per_minute: int = Field(120, ge=0, le=1_000_000)
    max_readings_per_minute_per_peer: int = Field(600, ge=0, le=1_000_000)  # all devices of one IP address
    login_backoff_s: float = Field(1.0, ge=0, le=3600)  # lock-out after a failed login, doubled per failure
    login_backoff_max_s: float = Field(60.0, ge=0, le=86400)
    readings_retention_days: int = Field(0, ge=0, le=36500)  # 0: keep readings forever


class StorageConfig(_Section):
    """Where the shared state lives: the embedded SQLite files (default) or one PostgreSQL."""

    backend: Literal["sqlite", "postgres"] = "sqlite"
    dsn_env: str = Field("GATEWAY_PG_DSN", pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")  # the DSN's variable
    connect_timeout_s: float = Field(5.0, gt=0, le=300)  # one connection attempt
    pool_size: int = Field(8, ge=1, le=1000)  # connections this gateway keeps open at most

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, value: Any) -> Any:
        # `storage: postgres` is short for `storage: {backend: postgres}`
        return {"backend": value} if isinstance(value, str) else value
