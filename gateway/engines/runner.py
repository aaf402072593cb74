"""Run blocking engines off the event loop: the one thread boundary for the models.

Each engine has a pool of executor threads sized to the cores (`engines.asr_workers`,
`engines.tts_workers`; VAD one thread per core), so a long decode of one box never makes another
box wait while a core is idle. An engine shared by the pool's threads must allow concurrent calls
(`thread_safe`: onnxruntime sessions run concurrent `run` calls, piper serialises only its espeak
phonemizer, both share their weights); one that does not runs one call at a time. Who runs next is
`gateway/engines/admission.py`: earliest deadline first, a bounded waiting line for new turns.
A worker is held until its thread is done with the call, not until the caller stops waiting; a
cancelled ASR call (a speculative decode the speech went on after, a barge-in, a close) sets the
call's `cancel` token, so an engine that decodes step by step (Moonshine) stops at its next step
and the worker goes to the next turn (counted in `asr_cancels`). A cancelled TTS call (a speculative
first piece the speech went on after, a barge-in) runs to its end on its thread: `tts_cancels`
counts them and the worker CPU they cost (so does `asr_cancels` for the decodes).
VAD detectors are per device session (`vad.clone()`), so each is entered by one call at a time;
a VAD that decides many detectors in one call (Silero) gets every device's waiting windows in one
call (gateway/engines/vad_batch.py).
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Protocol, TypeVar, runtime_checkable

import numpy as np

from gateway.engines.admission import Admission
from gateway.engines.tts_cache import TtsCache
from gateway.engines.base import AsrEngine, DecodeCancelled, SynthChunk, TtsEngine, VadEngine
from gateway.engines.vad_batch import BatchVad, VadBatcher
from gateway.engines.wake_word import WakeDetection, WakeWordDetector, WakeWordEngine

T = TypeVar("T")
log = logging.getLogger(__name__)


@runtime_checkable
class Shareable(Protocol):
    """An engine that declares whether several threads may call it at once."""

    thread_safe: bool


def pool_size(name: str, engine: object, configured: int) -> int:
    """Workers for `engine`: `configured` (0: one per core), 1 when it cannot be shared."""
    wanted = configured or os.cpu_count() or 1
    if wanted > 1 and not (isinstance(engine, Shareable) and engine.thread_safe):
        log.info("%s: %s takes one call at a time: 1 worker", name, type(engine).__name__)
        return 1
    return wanted


@dataclass
class Call:
    """One engine call's cancel token, whether its thread returned a result, and the worker CPU it
    took (for the cancelled ones: what the thrown-away result cost)."""

    cancel: threading.Event = field(default_factory=threading.Event)
    returned: bool = False
    cpu_s: float = 0.0  # its worker thread's CPU (onnxruntime's own intra-op threads not included)


@dataclass
class Cancels:
    """An engine's calls whose caller stopped waiting (for benchmarks and tests; updated from the
    threads)."""

    calls: int = 0  # calls made
    abandoned: int = 0  # callers that stopped waiting (before or during the call)
    stopped: int = 0  # calls the engine stopped early on their cancel token (decodes)
    finished: int = 0  # abandoned calls that ran to their end all the same (too late, or it cannot stop)
    stopped_steps: int = 0  # decoder steps the stopped decodes had run
    wasted_cpu_s: float = 0.0  # worker CPU of the abandoned calls a thread had run (stopped or finished)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def abandon(self, call: Call) -> None:
        """The caller stopped waiting (on the loop): the call's token is set."""
        with self._lock:
            call.cancel.set()
            self.abandoned += 1
            self.finished += call.returned  # its thread was done already, its result unused
            self.wasted_cpu_s += call.cpu_s if call.returned else 0.0

    def returned(self, call: Call, cpu_s: float) -> None:
        """The call's thread returned a result after `cpu_s` of its CPU (on the thread)."""
        with self._lock:
            call.returned = True
            call.cpu_s = cpu_s
            if call.cancel.is_set():
                self.finished += 1
                self.wasted_cpu_s += cpu_s

    def stop(self, steps: int, cpu_s: float) -> None:
        """The engine stopped the call early after `cpu_s` of its thread's CPU (on the thread)."""
        with self._lock:
            self.stopped += 1
            self.stopped_steps += steps
            self.wasted_cpu_s += cpu_s


class EngineRunner:
    def __init__(self, vad: VadEngine, asr: AsrEngine, tts: TtsEngine, *, asr_workers: int = 1,
                 tts_workers: int = 1, max_waiting_turns: int | None = None,
                 wake: WakeWordEngine | None = None, tts_cache: TtsCache | None = None) -> None:
        self.vad = vad
        self.tts_cache = tts_cache  # None: every text is synthesized (tts.cache_seconds 0)
        self.wake = wake  # None: no device of this config listens for a wake word (listen.mode)
        self.asr = asr
        self.tts = tts
        self.asr_admission = Admission("asr", pool_size("asr", asr, asr_workers), max_waiting_turns)
        self.tts_admission = Admission("tts", pool_size("tts", tts, tts_workers))
        cores = os.cpu_count() or 1
        self._vad_pool = ThreadPoolExecutor(cores, thread_name_prefix="vad")
        self._asr_pool = ThreadPoolExecutor(self.asr_admission.workers, thread_name_prefix="asr")
        self._clone_pool = ThreadPoolExecutor(1, thread_name_prefix="vad-clone")  # never delays a VAD decision
        self._tts_pool = ThreadPoolExecutor(self.tts_admission.workers, thread_name_prefix="tts")
        self._vad_batcher = VadBatcher(vad, self._vad_pool) if isinstance(vad, BatchVad) else None
        self.asr_cancels = Cancels()
        self.tts_cancels = Cancels()

    async def _run(self, pool: ThreadPoolExecutor, fn: Callable[..., T], *args: object) -> T:
        return await asyncio.get_running_loop().run_in_executor(pool, fn, *args)

    async def vad_windows(self, detector: VadEngine, windows: list[np.ndarray]) -> list[bool]:
        """Speech decisions for consecutive windows (one executor hop for the whole batch; with a
        batching VAD, one for every device's windows waiting at that moment)."""
        if self._vad_batcher is not None:
            return await self._vad_batcher.decide(detector, windows)
        return await self._run(self._vad_pool, lambda: [detector.is_speech(w) for w in windows])

    async def _admitted(self, admission: Admission, pool: ThreadPoolExecutor, who: str, deadline: float | None,
                        fn: Callable[..., T], *args: object) -> T:
        """`fn(*args)` on a worker of `admission`. The worker is given back when the thread is done
        with it, not when the caller stops waiting: a cancelled call (a speculative decode the
        speech went on after, a barge-in) returns at once, its thread keeps the slot until it is
        done (sooner when `fn` stops on the token `transcribe` sets)."""
        await admission.acquire(who, deadline)
        loop = asyncio.get_running_loop()
        try:
            job = pool.submit(fn, *args)
        except BaseException:
            admission.release()
            raise

        def done(_: object) -> None:
            try:
                loop.call_soon_threadsafe(admission.release)
            except RuntimeError:  # the loop is closed: nobody waits any more
                pass

        job.add_done_callback(done)
        return await asyncio.wrap_future(job)

    async def transcribe(self, audio: np.ndarray, who: str = "") -> str:
        """The utterance's text; raises EngineBusy when too many turns already wait for the ASR.
        Cancelled, it sets the call's cancel token: the engine may stop its decode early."""
        asr, call, cancels = self.asr, Call(), self.asr_cancels
        cancels.calls += 1

        def run() -> str:
            started = time.thread_time()
            try:
                text = asr.transcribe(audio, cancel=call.cancel)
            except DecodeCancelled as stopped:  # nobody waits for it: the worker is free sooner
                cancels.stop(stopped.steps, time.thread_time() - started)
                return ""
            cancels.returned(call, time.thread_time() - started)
            return text

        try:
            return await self._admitted(self.asr_admission, self._asr_pool, who, None, run)
        except asyncio.CancelledError:
            cancels.abandon(call)
            raise

    async def synthesize(self, text: str, who: str = "", deadline: float | None = None) -> list[SynthChunk]:
        """All chunks of `text` (piper yields one chunk per sentence). `deadline`: the clock time
        (time.monotonic) its audio is needed, None = now (a reply's first audio). Cancelled while
        its thread runs, the synthesis still runs to its end (counted in `tts_cancels`). A text in
        the cache is answered from it at once, without a worker (gateway/engines/tts_cache.py)."""
        if self.tts_cache is not None and (cached := self.tts_cache.get(text)) is not None:
            return cached
        call, cancels = Call(), self.tts_cancels
        cancels.calls += 1

        def run() -> list[SynthChunk]:
            started = time.thread_time()
            it: Iterator[SynthChunk] = self.tts.synthesize(text)
            chunks = list(it)
            cancels.returned(call, time.thread_time() - started)
            if self.tts_cache is not None:
                self.tts_cache.put(text, chunks)
            return chunks

        try:
            return await self._admitted(self.tts_admission, self._tts_pool, who, deadline, run)
        except asyncio.CancelledError:
            cancels.abandon(call)
            raise

    async def clone_vad(self) -> VadEngine:
        """A new detector for a device session, made off the event loop (a Silero clone builds an
        onnxruntime session: tens of ms, seconds for a burst of Hellos) on its own thread."""
        return await self._run(self._clone_pool, self.vad.clone)

    async def wake_detector(self) -> WakeWordDetector:
        """A device session's own wake-word state (its interpreters), made on the clone thread."""
        if self.wake is None:
            raise RuntimeError("no wake-word engine loaded (listen.mode needs none)")
        return await self._run(self._clone_pool, self.wake.detector)

    async def wake_words(self, detector: WakeWordDetector, pcm16: bytes) -> list[WakeDetection]:
        """Feed a device's 16 kHz audio to its wake-word detector (on the VAD threads: as cheap)."""
        return await self._run(self._vad_pool, detector.process, pcm16)

    def close(self) -> None:
        if self._vad_batcher is not None:
            self._vad_batcher.close()
        for pool in (self._vad_pool, self._clone_pool, self._asr_pool, self._tts_pool):
            pool.shutdown(wait=False, cancel_futures=True)
