"""Shared fixtures: the real models are loaded once per test session."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from pathlib import Path

import numpy as np
import pytest
import pytest_asyncio

from gateway.app import Gateway, load_runner
from gateway.audio.pcm import int16_to_float, resample
from gateway.config import GatewayConfig, parse_config
from gateway.engines.runner import EngineRunner
from gateway.links.memory import MemoryLink
from gateway.links.websocket import WebSocketLink

ROOT = Path(__file__).resolve().parents[1]


def words(text: str) -> list[str]:
    """Lower-case words without punctuation, for comparing transcripts."""
    return re.findall(r"[a-z0-9']+", text.lower())


@pytest.fixture(scope="session")
def cfg(tmp_path_factory: pytest.TempPathFactory) -> GatewayConfig:
    database = tmp_path_factory.mktemp("devices") / "gateway.db"
    return parse_config({"server": {"hello_timeout_s": 2}, "devices": {"database": str(database)}}, ROOT)


@pytest.fixture(scope="session")
def runner(cfg: GatewayConfig) -> EngineRunner:
    r = load_runner(cfg, lambda line: None)
    yield r
    r.close()


@pytest.fixture(scope="session")
def speak(runner: EngineRunner):
    """Synthesize `text` with the real TTS: (float32 mono, rate), with 0.3 s of lead-in silence."""

    def _speak(text: str) -> tuple[np.ndarray, int]:
        chunks = list(runner.tts.synthesize(text))
        audio = np.concatenate([int16_to_float(c.pcm) for c in chunks])
        rate = chunks[0].sample_rate
        return np.concatenate([np.zeros(int(0.3 * rate), np.float32), audio]), rate

    return _speak


@pytest.fixture(scope="session")
def transcribe(runner: EngineRunner):
    def _transcribe(audio: np.ndarray, rate: int) -> str:
        return runner.asr.transcribe(resample(audio, rate, 16000))

    return _transcribe


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def ws_gateway(cfg: GatewayConfig, runner: EngineRunner) -> AsyncIterator[str]:
    """A running gateway on a loopback WebSocket; yields its URL."""
    link = WebSocketLink("127.0.0.1", 0, cfg.server.websocket_path, cfg.server.max_frame_bytes)
    ready = asyncio.Event()
    task = asyncio.create_task(Gateway(cfg, runner, [link]).serve(ready))
    await asyncio.wait_for(ready.wait(), 10)
    yield f"ws://127.0.0.1:{link.port}{cfg.server.websocket_path}"
    task.cancel()


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def memory_link(cfg: GatewayConfig, runner: EngineRunner) -> AsyncIterator[MemoryLink]:
    """A running gateway behind an in-memory link; `memory_link.connect()` opens a device."""
    link = MemoryLink()
    ready = asyncio.Event()
    task = asyncio.create_task(Gateway(cfg, runner, [link]).serve(ready))
    await asyncio.wait_for(ready.wait(), 10)
    yield link
    task.cancel()
