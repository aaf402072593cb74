"""A gateway to attack: `python -m gateway.cli.limits_target CONFIG_JSON`.

It serves what `gateway run` serves on its WebSocket link (default_links: the session caps, the
login and reading limits, idle close; open files raised toward the hard limit, accept errors
throttled) on 127.0.0.1 at a free port, with the real Silero VAD (or the fake one with
`"fake_vad": true`) and the fake ASR and TTS, so it starts in seconds. CONFIG_JSON holds config
overrides (gateway.yaml keys) and `fake_vad`. It prints `port N` and `pid N` on stdout, logs to
stderr, and serves until SIGTERM. The abuse tests (tests/links/test_ws_abuse.py) and
`gateway bench-limits` run it as a separate process, so its file descriptors, log and memory
are its own.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import sys
from pathlib import Path
from typing import Any

from gateway.app import Gateway, default_links
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
    print(f"port {ws.port}\npid {os.getpid()}", flush=True)
    await stop.wait()
    serving.cancel()
    await asyncio.gather(serving, return_exceptions=True)
    runner.close()


def main() -> None:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    raise_fd_limit()
    asyncio.run(_serve(json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}))


if __name__ == "__main__":
    main()
