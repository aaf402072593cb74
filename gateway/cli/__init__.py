"""The `gateway` command: one module per command, assembled in `main`."""

from gateway.cli.main import main

__all__ = ["main"]
