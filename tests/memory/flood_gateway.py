"""Subprocess for the readings flood test: a gateway on the fake voice engines with the real memory
(MiniLM), a WebSocket link on a free loopback port and a blood-pressure threshold rule for anna.

Prints `ready <port>` once it listens, and its log (INFO) on stdout. Runs until killed.
Argument: the folder of both databases.
"""

import asyncio
import logging
import sys
from pathlib import Path

from gateway.app import Gateway
from gateway.config import parse_config
from gateway.engines.fake import FakeAsr, FakeTts, FakeVad
from gateway.engines.minilm_embed import MiniLmEmbedder
from gateway.engines.runner import EngineRunner
from gateway.engines.store import ModelStore
from gateway.links.websocket import WebSocketLink
from gateway.memory.service import MemoryService

ROOT = Path(__file__).resolve().parents[2]
SENSORS = ("bp-1", "bp-2", "bp-3", "bp-4")
RULE = "Blood pressure high."


async def main(folder: Path) -> None:
    cfg = parse_config({"devices": {"database": str(folder / "gw.db"), "max_readings_per_minute": 0},
                        "memory": {"path": str(folder / "memory.db"), "users": {s: "anna" for s in SENSORS},
                                   "rules": [{"user": "anna", "text": RULE, "reading": "blood_pressure",
                                              "above": "140/90"}]}}, ROOT)
    store = ModelStore(cfg)
    memory = MemoryService(cfg.path(cfg.memory.path), lambda: MiniLmEmbedder.from_store(store),
                           users=cfg.memory.users, default_user=cfg.memory.default_user)
    link = WebSocketLink("127.0.0.1", 0, cfg.server.websocket_path, cfg.server.max_frame_bytes)
    gateway = Gateway(cfg, EngineRunner(FakeVad(), FakeAsr(), FakeTts()), [link], memory=memory)
    ready = asyncio.Event()
    async with asyncio.TaskGroup() as tg:
        tg.create_task(gateway.serve(ready))
        await ready.wait()
        print("ready", link.port, flush=True)


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, stream=sys.stdout, format="%(name)s: %(message)s")
    asyncio.run(main(Path(sys.argv[1])))
