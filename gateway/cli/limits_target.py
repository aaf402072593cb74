"""A gateway to attack: `python -m gateway.cli.limits_target CONFIG_JSON`.

It serves what `gateway run` serves on its WebSocket link (default_links: the session caps, the
login and reading limits, idle close; open files raised toward the hard limit, accept errors
throttled) on 127.0.0.1 at a free port, with the real Silero VAD (or the fake one with
`"fake_vad": true`) and the fake ASR and TTS, so it starts in seconds. CONFIG_JSON holds config
overrides (gateway.yaml keys) and `fake_vad`. It prints `port N` on stdout, logs to stderr, and
serves until SIGTERM. The abuse tests (tests/links/test_ws_exhaustion.py) and
`gateway bench-limits` start it with `started` as a separate process, so its file descriptors,
log and memory are its own.
"""

from __future__ import annotations

import asyncio
import json
import logging
import resource
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO

from gateway.app import Gateway
from gateway.app_links import default_links
from gateway.config import parse_config
from gateway.engines.fake import FakeAsr, FakeTts, FakeVad
from gateway.engines.runner import EngineRunner
from gateway.links.limits import raise_fd_limit
from gateway.links.websocket import WebSocketLink

CHECKOUT = Path(__file__).resolve().parents[2]
ONLY_WEBSOCKET = {"mqtt": {"enabled": False}, "coap": {"enabled": False}, "screens": {"enabled": False},
                  "xiaozhi": {"enabled": False}, "memory": {"enabled": False}}


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        out[key] = _merge(out.get(key, {}), value) if isinstance(value, dict) else value
    return out


async def _serve(overrides: dict[str, Any]) -> None:
    fake_vad = bool(overrides.pop("fake_vad", False))
    data = _merge(_merge(ONLY_WEBSOCKET, overrides), {"server": {"host": "127.0.0.1", "websocket_port": 0}})
    cfg = parse_config(data, CHECKOUT)  # model paths are relative to the checkout
    if fake_vad:
        vad = FakeVad()
    else:
        from gateway.engines.factory import load_vad
        from gateway.engines.store import ModelStore

        vad = load_vad(cfg, ModelStore(cfg))
    runner = EngineRunner(vad, FakeAsr(), FakeTts())
    links = default_links(cfg)
    (ws,) = [link for link in links if isinstance(link, WebSocketLink)]
    ready = asyncio.Event()
    serving = asyncio.create_task(Gateway(cfg, runner, links).serve(ready))
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await ready.wait()
    print(f"port {ws.port}", flush=True)
    await stop.wait()
    serving.cancel()
    await asyncio.gather(serving, return_exceptions=True)
    runner.close()


class Target:
    """The running gateway process: its port, its log lines so far, its resident memory."""

    def __init__(self, proc: subprocess.Popen[str], port: int) -> None:
        self.proc, self.port = proc, port
        self.url = f"ws://127.0.0.1:{port}/ws"
        self.log: list[str] = []
        assert proc.stderr is not None
        threading.Thread(target=self._read, args=(proc.stderr,), daemon=True).start()

    def _read(self, stream: TextIO) -> None:
        for line in stream:
            self.log.append(line.rstrip("\n"))

    def rss_mb(self) -> float:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        raise RuntimeError(f"no VmRSS for pid {self.proc.pid}")


@contextmanager
def started(overrides: dict[str, Any], nofile: int | None = None) -> Iterator[Target]:
    """Run the target in a process until the block ends; with `nofile`, its soft and hard
    RLIMIT_NOFILE are that (so raising the soft limit cannot help it)."""

    def limit() -> None:
        if nofile is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

    proc = subprocess.Popen([sys.executable, "-m", "gateway.cli.limits_target", json.dumps(overrides)],
                            cwd=CHECKOUT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=limit)
    try:
        assert proc.stdout is not None and proc.stderr is not None
        first = proc.stdout.readline()  # "port N" once it serves (the real VAD loads in seconds)
        if not first.startswith("port "):
            raise RuntimeError(f"the target gateway did not start: {proc.stderr.read() if proc.poll() is not None else first}")
        yield Target(proc, int(first.split()[1]))
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def main() -> None:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    raise_fd_limit()
    asyncio.run(_serve(json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}))


if __name__ == "__main__":
    main()
