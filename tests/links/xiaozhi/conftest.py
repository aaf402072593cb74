"""Gateways with the xiaozhi endpoints on loopback: on the fake engines (protocol, enrolment, bad
input) or the real models (the end-to-end proof). Each yields its base http://127.0.0.1:PORT."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from gateway.app import Gateway
from gateway.config import GatewayConfig, parse_config
from gateway.engines.runner import EngineRunner
from gateway.links.websocket import WebSocketLink
from gateway.links.xiaozhi.emotions import EmotionTable
from gateway.links.xiaozhi.endpoint import XiaozhiEndpoint

ROOT = Path(__file__).resolve().parents[3]


def xiaozhi_cfg(tmp: Path, **sections: Any) -> GatewayConfig:
    data: dict[str, Any] = {"server": {"hello_timeout_s": 1}, "devices": {"database": str(tmp / "gateway.db")},
                            "memory": {"enabled": False}}
    data.update(sections)
    return parse_config(data, ROOT)


async def serve_xiaozhi(cfg: GatewayConfig, runner: EngineRunner) -> AsyncIterator[str]:
    s = cfg.server
    endpoint = XiaozhiEndpoint.from_config(cfg.xiaozhi, EmotionTable.load(cfg.path(cfg.xiaozhi.emotions)), s.max_frame_bytes)
    link = WebSocketLink("127.0.0.1", 0, s.websocket_path, s.max_frame_bytes, [endpoint])
    ready = asyncio.Event()
    task = asyncio.create_task(Gateway(cfg, runner, [link]).serve(ready))
    await asyncio.wait_for(ready.wait(), 10)
    yield f"http://127.0.0.1:{link.port}"
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def xz_gateway(tmp_path_factory: pytest.TempPathFactory, fake_runner: EngineRunner) -> AsyncIterator[str]:
    """Open enrolment (the default), fake engines."""
    async for url in serve_xiaozhi(xiaozhi_cfg(tmp_path_factory.mktemp("xz-open")), fake_runner):
        yield url


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def xz_closed_gateway(tmp_path_factory: pytest.TempPathFactory, fake_runner: EngineRunner) -> AsyncIterator[str]:
    """devices.open_enrolment off, fake engines."""
    cfg = xiaozhi_cfg(tmp_path_factory.mktemp("xz-closed"), devices={"open_enrolment": False,
                      "database": str(tmp_path_factory.mktemp("xz-closed-db") / "gateway.db")})
    async for url in serve_xiaozhi(cfg, fake_runner):
        yield url


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def xz_real_gateway(tmp_path_factory: pytest.TempPathFactory, runner: EngineRunner) -> AsyncIterator[str]:
    """Open enrolment, the real models."""
    async for url in serve_xiaozhi(xiaozhi_cfg(tmp_path_factory.mktemp("xz-real")), runner):
        yield url
