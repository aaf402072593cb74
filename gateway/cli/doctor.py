"""`gateway doctor`: check this machine can run the gateway, and say how to fix what is wrong.

One line per check, `OK`, `WARN` or `FAIL`, followed by `-> what to do` for every problem.
The exit code is non-zero only when something FAILs. Doctor never changes anything: it does not
prepare models (it tells you to), binds each port only for a moment to test it, and asks a
gateway already holding a port whether it answers (gateway/cli/doctor_ports.py).
"""

from __future__ import annotations

from typing import Any
import argparse
import importlib.metadata
import importlib.util
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from gateway.cli.checks import FAIL, OK, WARN, Check
from gateway.cli.doctor_ports import port_checks
from gateway.config import GatewayConfig
from gateway.devices.database import connect
from gateway.devices.reading_writer import commit_once, writer_command
from gateway.errors import GatewayError
from gateway.engines.store import ModelStore

_DISK_WARN_MB = 500  # enough to copy all models where symlinks are impossible
_DISK_FAIL_MB = 50


def _python() -> Iterator[Check]:
    v = sys.version_info
    text = f"Python {v.major}.{v.minor}.{v.micro}"
    if v >= (3, 11):
        yield Check(OK, text)
    else:
        yield Check(FAIL, f"{text} is too old", "install Python 3.11 or newer")


def _used_models(cfg: GatewayConfig) -> set[str]:
    used = {cfg.vad.model, cfg.tts.voice}
    if cfg.memory.enabled and cfg.memory.embedding == "all-minilm-l6-v2-int8":
        used |= {"all-minilm-l6-v2-int8", "all-minilm-l6-v2-tokenizer"}
    return used | cfg.asr.models()


def _models(cfg: GatewayConfig, store: ModelStore) -> tuple[list[Check], bool]:
    """One check per model, and whether every model this config uses is ready."""
    used = _used_models(cfg)
    known = {m.name for m in store.manifest.models}
    checks = [
        Check(FAIL, f"model {name}: configured but not in {store.manifest_path}",
              "fix vad.model / asr.model / tts.voice in gateway.yaml (see `gateway models list`)")
        for name in sorted(used - known)
    ]
    ready = not checks
    for status in store.list():
        problems = store.verify(status.name)
        if not problems:
            checks.append(Check(OK, f"model {status.name}: prepared, checksums match ({status.path})"))
            continue
        in_use = status.name in used
        ready = ready and not in_use
        note = "" if in_use else " (not used by this config)"
        # "NAME: not prepared" / "NAME/FILE: sha256 ... does not match" -> without the repeated name
        text = "; ".join(p.removeprefix(f"{status.name}: ").removeprefix(f"{status.name}/") for p in problems)
        checks.append(Check(FAIL if in_use else WARN, f"model {status.name}{note}: {text}",
                            f"run `gateway models prepare {status.name}`"))
    return checks, ready


def _engines(cfg: GatewayConfig, store: ModelStore, ready: bool) -> Iterator[Check]:
    if not ready:
        yield Check(FAIL, "engines: not loaded, because of the model problems above",
                    "run `gateway models prepare`, then `gateway doctor` again")
        return
    from gateway.engines.factory import load_engines

    start = time.perf_counter()
    try:
        engines = load_engines(cfg, store)
    except GatewayError as exc:
        yield Check(FAIL, f"engines: {exc.text}", "see the message; `gateway models verify` may help")
        return
    except Exception as exc:  # doctor is a boundary: report any engine failure as a finding
        yield Check(FAIL, f"engines: {type(exc).__name__}: {exc}",
                    "reinstall the engine packages (`pip install -e .`) and report the error")
        return
    parts = ", ".join(f"{k} {v:.2f} s" for k, v in engines.load_seconds.items())
    yield Check(OK, f"engines load in {time.perf_counter() - start:.2f} s ({parts})")


def _sqlite() -> Iterator[Check]:
    """The memory's real path: apsw opens SQLite and loads sqlite-vec (the stdlib module can't here)."""
    stdlib = f"stdlib sqlite3 {sqlite3.sqlite_version}: " + (
        "can load extensions" if hasattr(sqlite3.Connection, "enable_load_extension")
        else "built without enable_load_extension, so the memory uses apsw")
    try:
        import apsw

        from gateway.memory.schema import load_vec

        conn = apsw.Connection(":memory:")
        version = load_vec(conn)
        conn.execute("CREATE VIRTUAL TABLE t USING vec0(embedding BIT[384])")
        conn.close()
    except ImportError as exc:
        yield Check(FAIL, f"memory: {exc.name} is not installed ({stdlib})",
                    "pip install 'apsw>=3.45' 'sqlite-vec==0.1.*' (or `pip install -e .`)")
        return
    except GatewayError as exc:
        yield Check(FAIL, f"memory: {exc.text} ({stdlib})", "or set memory.enabled: false in gateway.yaml")
        return
    yield Check(OK, f"memory: SQLite {apsw.sqlite_lib_version()} (apsw) loads sqlite-vec {version}; {stdlib}")


def _readings_writer() -> Iterator[Check]:
    """The readings' writer process starts, as the gateway starts it, and commits a reading (in a
    scratch database)."""
    with tempfile.TemporaryDirectory(prefix="gateway-doctor-") as folder:
        path = Path(folder) / "check.db"
        connect(path).close()
        row = ("doctor", 1, "check", 0.0, 0.0, "gateway", "[]")
        try:
            outcomes = commit_once(path, [row])
        except (OSError, RuntimeError, subprocess.SubprocessError) as exc:
            yield Check(FAIL, f"readings writer: {' '.join(writer_command(path)[:3])} failed: {exc}",
                        "the gateway could not store sensor readings; reinstall Python with its sqlite3 module")
            return
    if outcomes != [(1, True)]:
        yield Check(FAIL, f"readings writer: a test reading gave {outcomes!r}", "report it: this is a bug")
        return
    yield Check(OK, "readings writer: its process starts and commits a reading (scratch database)")


def _libraries() -> Iterator[Check]:
    found, missing = [], []
    for dist in ("numpy", "soxr", "onnxruntime", "sherpa-onnx", "piper-tts"):
        try:
            found.append(f"{dist} {importlib.metadata.version(dist)}")
        except importlib.metadata.PackageNotFoundError:
            missing.append(dist)
    if missing:
        yield Check(FAIL, f"audio libraries missing: {', '.join(missing)}",
                    f"pip install {' '.join(missing)} (or `pip install -e .`)")
    else:
        yield Check(OK, "audio libraries: " + ", ".join(found))


def _espeak() -> Iterator[Check]:
    spec = importlib.util.find_spec("piper")  # located, not imported
    locations = list(spec.submodule_search_locations or []) if spec else []
    data = Path(locations[0]) / "espeak-ng-data" if locations else None
    if data is not None and (data / "phontab").is_file() and (data / "en_dict").is_file():
        yield Check(OK, f"espeak-ng data bundled with piper: {data}")
    else:
        yield Check(FAIL, "espeak-ng data bundled with piper-tts is missing",
                    "pip install --force-reinstall 'piper-tts>=1.8,<2'")


def _disk(cfg: GatewayConfig) -> Iterator[Check]:
    path = cfg.path(cfg.models.dir)
    probe = next((p for p in (path, *path.parents) if p.exists()), Path("/"))
    free_mb = shutil.disk_usage(probe).free / 1e6
    text = f"disk: {free_mb:,.0f} MB free for {path}"
    if free_mb < _DISK_FAIL_MB:
        yield Check(FAIL, text, "free some space on that file system or move models.dir")
    elif free_mb < _DISK_WARN_MB:
        yield Check(WARN, text, "models are symlinked, but copies need ~130 MB; free some space")
    else:
        yield Check(OK, text)


def _files(cfg: GatewayConfig) -> Iterator[Check]:
    """The files the config names (brain.replies, expression.*, ...): the same check as `gateway run`'s."""
    from gateway.cli.preflight import configured_files, file_problems

    problems = file_problems(cfg)
    for problem in problems:
        yield Check(FAIL, problem, "fix that file, or point its key in gateway.yaml at a good one")
    if not problems:
        yield Check(OK, "files: " + ", ".join(key for key, _ in configured_files(cfg)) + " are there and valid")


def _mcp_servers(cfg: GatewayConfig) -> Iterator[Check]:
    """Each external MCP server of brain.mcp_servers, connected once; the gateway runs without them."""
    if not cfg.brain.mcp_servers:
        return
    import asyncio

    from gateway.brain.mcp_client import probe  # imports the mcp SDK only when servers are configured

    for server in cfg.brain.mcp_servers:
        tools, why = asyncio.run(probe(server))
        if why is None:
            yield Check(OK, f"MCP server {server.name}: tools {', '.join(tools) or '(none)'}")
        else:
            yield Check(WARN, f"MCP server {server.name}: not reachable: {why}",
                        "fix its command / url / headers in brain.mcp_servers, or start that server")


def checks_without_engines(cfg: GatewayConfig) -> list[Check]:
    """What `gateway doctor` checks except loading the engines (for the running gateway: the
    console's health page; blocking: model checksums are read, run it on a thread)."""
    checks: list[Check] = [*_python()]
    try:
        checks.extend(_models(cfg, ModelStore(cfg))[0])
    except GatewayError as exc:
        checks.append(Check(FAIL, f"model manifest: {exc.text}", "set models.manifest in gateway.yaml"))
    for part in (_files(cfg), port_checks(cfg), _sqlite(), _readings_writer(), _libraries(), _espeak(), _disk(cfg), _mcp_servers(cfg)):
        checks.extend(part)
    return checks


def run_doctor(cfg: GatewayConfig, out: Callable[[str], None] = print) -> int:
    """Run every check, print one line each; returns 1 if any check FAILed, else 0."""
    checks: list[Check] = [*_python()]
    try:
        store = ModelStore(cfg)
    except GatewayError as exc:
        checks.append(Check(FAIL, f"model manifest: {exc.text}", "set models.manifest in gateway.yaml"))
        checks.append(Check(FAIL, "engines: not loaded, no model manifest"))
    else:
        model_checks, ready = _models(cfg, store)
        checks.extend(model_checks)
        checks.extend(_engines(cfg, store, ready))
    for part in (_files(cfg), port_checks(cfg), _sqlite(), _readings_writer(), _libraries(), _espeak(), _disk(cfg), _mcp_servers(cfg)):
        checks.extend(part)
    for c in checks:
        out(f"{c.status:<4} {c.what}")
        if c.fix and c.status != OK:
            out(f"     -> {c.fix}")
    failed = sum(c.status == FAIL for c in checks)
    warned = sum(c.status == WARN for c in checks)
    out(f"{len(checks)} checks: {failed} failed, {warned} warnings")
    return 1 if failed else 0


def run(args: argparse.Namespace, cfg: GatewayConfig) -> int:

    return run_doctor(cfg)


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    doc = sub.add_parser("doctor", parents=[common], help="check models, files, ports, SQLite and audio libraries; say what to fix",
                         description="Checks Python, the models and their checksums (and loads the engines), the "
                         "files the config names, every port (free, or held by a running gateway that answers), "
                         "SQLite's vector extension, the readings' writer process, the audio libraries, the disk and external MCP servers; one "
                         "line each, with what to do. Changes nothing. Exit code 0 when nothing FAILs (warnings "
                         "allowed), 1 when a check FAILs, 2 for a config error.")
    doc.set_defaults(func=run)
