"""Shared fixtures: the real models are loaded once per test session (`runner`, `speak`,
`transcribe`, `ws_gateway`); the fake engines (gateway/engines/fake.py) cost nothing
(`fake_runner`, `fake_speak`, `fake_transcribe`, `fake_ws_gateway`, `memory_link`).

Fake speech is the tone code of the fake TTS: `fake_speak(text)` gives audio that the fake VAD
calls speech and the fake ASR hears as exactly `text`. Use the real ones only where the models
are what is tested (tests/engines) or for the end-to-end proof (mark those `models`)."""

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
from gateway.engines.base import AsrEngine, TtsEngine
from gateway.engines.fake import FakeAsr, FakeTts, FakeVad
from gateway.engines.runner import EngineRunner
from gateway.links.memory import MemoryLink
from gateway.links.websocket import WebSocketLink
from tests.postgres_server import postgres_dsn, postgres_server  # noqa: F401  (fixtures: a real PostgreSQL)

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
def fake_runner() -> EngineRunner:
    """The fake VAD, ASR and TTS on their executor threads: deterministic and instant."""
    r = EngineRunner(FakeVad(), FakeAsr(), FakeTts())
    yield r
    r.close()


def speaker_of(tts: TtsEngine):
    """speak(text) -> (float32 mono, rate) said by `tts`, with 0.3 s of lead-in silence."""

    def _speak(text: str) -> tuple[np.ndarray, int]:
        chunks = list(tts.synthesize(text))
        audio = np.concatenate([int16_to_float(c.pcm) for c in chunks])
        rate = chunks[0].sample_rate
        return np.concatenate([np.zeros(int(0.3 * rate), np.float32), audio]), rate

    return _speak


def transcriber_of(asr: AsrEngine):
    """transcribe(audio, rate) -> what `asr` hears in float32 mono audio at any rate."""

    def _transcribe(audio: np.ndarray, rate: int) -> str:
        return asr.transcribe(resample(audio, rate, 16000))

    return _transcribe


@pytest.fixture(scope="session")
def speak(runner: EngineRunner):
    """Synthesize `text` with the real TTS: (float32 mono, rate), with 0.3 s of lead-in silence."""
    return speaker_of(runner.tts)


@pytest.fixture(scope="session")
def transcribe(runner: EngineRunner):
    return transcriber_of(runner.asr)


@pytest.fixture(scope="session")
def fake_speak(fake_runner: EngineRunner):
    """Like `speak`, in the fake TTS's tone code: the fake ASR hears exactly `text`."""
    return speaker_of(fake_runner.tts)


@pytest.fixture(scope="session")
def fake_transcribe(fake_runner: EngineRunner):
    return transcriber_of(fake_runner.asr)


async def _serve_ws(cfg: GatewayConfig, runner: EngineRunner) -> AsyncIterator[str]:
    link = WebSocketLink("127.0.0.1", 0, cfg.server.websocket_path, cfg.server.max_frame_bytes)
    ready = asyncio.Event()
    task = asyncio.create_task(Gateway(cfg, runner, [link]).serve(ready))
    await asyncio.wait_for(ready.wait(), 10)
    yield f"ws://127.0.0.1:{link.port}{cfg.server.websocket_path}"
    task.cancel()


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def ws_gateway(cfg: GatewayConfig, runner: EngineRunner) -> AsyncIterator[str]:
    """A running gateway with the real models on a loopback WebSocket; yields its URL."""
    async for url in _serve_ws(cfg, runner):
        yield url


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def fake_ws_gateway(fake_cfg: GatewayConfig, fake_runner: EngineRunner) -> AsyncIterator[str]:
    """A running gateway on the fake engines on a loopback WebSocket; yields its URL."""
    async for url in _serve_ws(fake_cfg, fake_runner):
        yield url


@pytest.fixture(scope="session")
def fake_cfg(tmp_path_factory: pytest.TempPathFactory) -> GatewayConfig:
    """Like `cfg`, with its own device database (the fake gateways run beside the real ones)."""
    database = tmp_path_factory.mktemp("fake-devices") / "gateway.db"
    return parse_config({"server": {"hello_timeout_s": 2}, "devices": {"database": str(database)}}, ROOT)


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def memory_link(fake_cfg: GatewayConfig, fake_runner: EngineRunner) -> AsyncIterator[MemoryLink]:
    """A running gateway on the fake engines behind an in-memory link; `memory_link.connect()`
    opens a device."""
    link = MemoryLink()
    ready = asyncio.Event()
    task = asyncio.create_task(Gateway(fake_cfg, fake_runner, [link]).serve(ready))
    await asyncio.wait_for(ready.wait(), 10)
    yield link
    task.cancel()
