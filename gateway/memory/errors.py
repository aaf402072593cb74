"""Memory errors with stable codes (raised to MCP clients and the CLI as clear messages)."""

from __future__ import annotations

from gateway.errors import GatewayError


class MemoryError_(GatewayError):  # noqa: N801 - never shadow the builtin MemoryError
    code = "memory-failed"


class MemoryInputError(MemoryError_):
    """Bad input from a caller (unknown kind, empty content, malformed tag...)."""

    code = "memory-bad-input"


class MemoryUnavailable(MemoryError_):
    """SQLite cannot load sqlite-vec, or the database cannot be opened."""

    code = "memory-unavailable"
