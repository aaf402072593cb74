"""Run blocking engines off the event loop, each on its own executor thread.

VAD, ASR and TTS each get one dedicated thread, so a long ASR decode never delays the VAD of
other devices, and no engine is ever entered by two threads at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import numpy as np

from gateway.engines.base import AsrEngine, SynthChunk, TtsEngine, VadEngine

T = TypeVar("T")


class EngineRunner:
    def __init__(self, vad: VadEngine, asr: AsrEngine, tts: TtsEngine) -> None:
        self.vad = vad
        self.asr = asr
        self.tts = tts
        self._vad_pool = ThreadPoolExecutor(1, thread_name_prefix="vad")
        self._asr_pool = ThreadPoolExecutor(1, thread_name_prefix="asr")
        self._clone_pool = ThreadPoolExecutor(1, thread_name_prefix="vad-clone")  # never delays a VAD decision
        self._tts_pool = ThreadPoolExecutor(1, thread_name_prefix="tts")

    async def _run(self, pool: ThreadPoolExecutor, fn: Callable[..., T], *args: object) -> T:
        return await asyncio.get_running_loop().run_in_executor(pool, fn, *args)

    async def vad_windows(self, detector: VadEngine, windows: list[np.ndarray]) -> list[bool]:
        """Speech decisions for consecutive windows (one executor hop for the whole batch)."""
        return await self._run(self._vad_pool, lambda: [detector.is_speech(w) for w in windows])

    async def transcribe(self, audio: np.ndarray) -> str:
        return await self._run(self._asr_pool, self.asr.transcribe, audio)

    async def synthesize(self, text: str) -> list[SynthChunk]:
        """All chunks of one sentence (piper yields one chunk per sentence anyway)."""

        def run() -> list[SynthChunk]:
            it: Iterator[SynthChunk] = self.tts.synthesize(text)
            return list(it)

        return await self._run(self._tts_pool, run)

    async def clone_vad(self) -> VadEngine:
        """A new detector for a device session, made off the event loop (a Silero clone builds an
        onnxruntime session: tens of ms, seconds for a burst of Hellos) on its own thread."""
        return await self._run(self._clone_pool, self.vad.clone)

    def close(self) -> None:
        for pool in (self._vad_pool, self._clone_pool, self._asr_pool, self._tts_pool):
            pool.shutdown(wait=False, cancel_futures=True)
