"""A virtual voice box: streams a WAV to the gateway like an ESP32 microphone and records the reply.

Used by `gateway simulate`, the end-to-end tests and the benchmark. After the WAV it keeps
sending silence in real time, as an always-listening box does, until the reply ends (or, with
push-to-talk, it closes the audio stream right after the WAV). Like a real box it answers the
gateway's Ping, so a push-to-talk box waiting longer than server.session_idle_s for a slow reply
keeps its session.
"""

from __future__ import annotations

import asyncio
import time
import wave
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from firmware_protocol import (
    AudioChunk,
    AudioFormat,
    AudioStart,
    AudioStop,
    Capability,
    Error,
    Hello,
    Message,
    Ping,
    Pong,
    ReplyText,
    StopReason,
    Transcript,
    VadEvent,
    Welcome,
    decode,
    encode,
)
from gateway.audio.pcm import float_to_s16le, resample, s16le_to_float
from gateway.links.device_side import open_device
from gateway.expression.events import EXPRESSION_MESSAGES, expression_event

CHUNK_MS = 20
EXPRESSIVE = Capability.AUDIO_IN | Capability.AUDIO_OUT | Capability.VISEMES | Capability.ACTION
Emit = Callable[[dict[str, Any]], None]


class SimulateError(Exception):
    """The simulated box could not do its job (no gateway, no reply...)."""


@dataclass
class SimResult:
    transcript: str = ""
    reply_text: str = ""
    sentences: list[str] = field(default_factory=list)
    reply_audio: bytes = b""  # s16le mono at out_rate
    out_rate: int = 16000
    first_audio_ms: float | None = None
    aborted: bool = False
    errors: list[tuple[str, str]] = field(default_factory=list)
    expression: list[Message] = field(default_factory=list)  # Visemes, Action, ... in arrival order
    stream_log: list[tuple[str, int]] = field(default_factory=list)  # (message name, stream id) in order
    stream_bytes: dict[int, int] = field(default_factory=dict)  # reply audio bytes per stream

    @property
    def audio_seconds(self) -> float:
        return len(self.reply_audio) / 2 / self.out_rate


def read_wav(path: Path) -> tuple[np.ndarray, int]:
    """A 16-bit PCM WAV as mono float32 samples and its rate."""
    try:
        with wave.open(str(path), "rb") as w:
            if w.getsampwidth() != 2:
                raise SimulateError(f"{path}: need 16-bit PCM WAV, got {8 * w.getsampwidth()}-bit")
            data, rate, channels = w.readframes(w.getnframes()), w.getframerate(), w.getnchannels()
    except (OSError, wave.Error, EOFError) as exc:
        raise SimulateError(f"{path}: cannot read WAV: {exc}") from None
    return s16le_to_float(data, channels), rate


def write_wav(path: Path, pcm: bytes, rate: int) -> None:
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(pcm)


async def simulate(
    url: str,
    audio: np.ndarray,
    rate: int,
    *,
    device_id: str = "simulator",
    out_rate: int = 16000,
    speed: float = 1.0,
    push_to_talk: bool = False,
    timeout: float = 60.0,
    emit: Emit = lambda event: None,
    capabilities: int = EXPRESSIVE,
    transport: str = "ws",
    token: str = "",
) -> SimResult:
    """Stream `audio` (float32 mono at `rate`) to the gateway at `url` and collect the reply.

    `transport` is ws, mqtt or serial (see gateway/links/device_side.py for the URL forms).
    """
    try:
        ws = await open_device(transport, url, device_id, token)
    except (OSError, asyncio.TimeoutError, Exception) as exc:  # each transport raises its own kinds
        raise SimulateError(f"cannot connect to {url}: {exc}. Is `gateway run` running there?") from None
    result = SimResult(out_rate=out_rate)
    async with ws:
        hello = Hello(device_id=device_id, token=token, capabilities=capabilities, audio_in=AudioFormat(sample_rate=rate),
                      audio_out=AudioFormat(sample_rate=out_rate))
        try:  # CoAP has no connection: an absent gateway shows on the first request
            await ws.send(encode(hello))
            welcome = decode(await asyncio.wait_for(ws.recv(), 15))
        except asyncio.TimeoutError:
            raise SimulateError(f"{url} sent no Welcome within 15 s of the Hello") from None
        except Exception as exc:  # each transport raises its own kinds (LinkClosed, a closed WebSocket)
            raise SimulateError(f"no Welcome from {url}: {exc}. Is `gateway run` running there?") from None
        if not isinstance(welcome, Welcome):
            raise SimulateError(f"expected welcome, got {welcome}")
        result.out_rate = welcome.audio_out.sample_rate
        emit({"event": "connected", "session_id": welcome.session_id, "server": welcome.server})
        await converse(ws, audio, rate, result, speed=speed, push_to_talk=push_to_talk, timeout=timeout,
                       emit=emit, peer=url)
    return result


async def converse(ws, audio: np.ndarray, rate: int, result: SimResult, *, speed: float = 1.0,
                   push_to_talk: bool = False, timeout: float = 60.0, emit: Emit = lambda event: None,
                   peer: str = "the gateway") -> SimResult:
    """One question on a welcomed connection `ws` (frames, like open_device's): stream `audio`,
    collect the reply into `result` (its out_rate from the Welcome) until its final ReplyText."""
    done = asyncio.Event()
    input_end: list[float] = []
    receiver = asyncio.create_task(_receive(ws, result, emit, done, input_end))
    try:
        async with asyncio.timeout(timeout):
            await _stream(ws, audio, rate, speed, push_to_talk, done, input_end)
            waiter = asyncio.create_task(done.wait())
            try:  # the reply, or the gateway closing the connection without one
                await asyncio.wait({waiter, receiver}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                waiter.cancel()
            if not done.is_set():
                receiver.result()  # the connection's own error, if it failed
                why = "; ".join(f"{code}: {text}" for code, text in result.errors) or "no reason given"
                raise SimulateError(f"{peer} closed the connection before the reply ({why})")
    except SimulateError:
        raise
    except TimeoutError:
        raise SimulateError(f"no complete reply within {timeout:.0f} s") from None
    except Exception as exc:  # the link went away mid-stream (each transport raises its own kind)
        raise SimulateError(f"the connection to {peer} was lost: {exc}") from None
    finally:
        receiver.cancel()
    emit({"event": "reply_end", "audio_seconds": round(result.audio_seconds, 3), "aborted": result.aborted})
    return result


async def _stream(ws, audio: np.ndarray, rate: int, speed: float, ptt: bool, done: asyncio.Event, input_end: list[float]) -> None:
    step = int(rate * CHUNK_MS / 1000)
    pace = CHUNK_MS / 1000 / speed if speed > 0 else 0.0
    await ws.send(encode(AudioStart(stream_id=1, format=AudioFormat(sample_rate=rate))))
    start = time.monotonic()
    seq = 0
    for seq, i in enumerate(range(0, len(audio), step)):
        await ws.send(encode(AudioChunk(stream_id=1, seq=seq, data=float_to_s16le(audio[i : i + step]))))
        await _sleep_until(start + (seq + 1) * pace)
    input_end.append(time.monotonic())
    if ptt:
        await ws.send(encode(AudioStop(stream_id=1, reason=StopReason.END)))
        return
    silence = float_to_s16le(np.zeros(step, np.float32))
    while not done.is_set():  # an always-listening box keeps streaming its (quiet) microphone
        seq += 1
        await ws.send(encode(AudioChunk(stream_id=1, seq=seq, data=silence)))
        await _sleep_until(start + (seq + 1) * pace)


async def _sleep_until(when: float) -> None:
    delay = when - time.monotonic()
    if delay > 0:
        await asyncio.sleep(delay)


async def _receive(ws, result: SimResult, emit: Emit, done: asyncio.Event, input_end: list[float]) -> None:
    chunks: list[bytes] = []
    sentence_of: dict[int, str] = {}
    async for frame in ws:
        msg = decode(frame)
        stream_id = getattr(msg, "stream_id", None)
        if stream_id is not None and not (isinstance(msg, AudioChunk) and msg.seq):  # first chunks only
            result.stream_log.append((msg.NAME, stream_id))
        if isinstance(msg, EXPRESSION_MESSAGES):
            result.expression.append(msg)
            emit(expression_event(msg, sentence_of.get(stream_id or 0, "")))
        if isinstance(msg, AudioChunk):
            result.stream_bytes[msg.stream_id] = result.stream_bytes.get(msg.stream_id, 0) + len(msg.data)
            if result.first_audio_ms is None:
                result.first_audio_ms = (time.monotonic() - input_end[0]) * 1000 if input_end else 0.0
                emit({"event": "first_audio", "ms": round(result.first_audio_ms, 1)})
            chunks.append(msg.data)
        elif isinstance(msg, VadEvent):
            name = "speech_start" if msg.event == VadEvent.SPEECH_START else "speech_end"
            emit({"event": name, "audio_ms": msg.audio_ms})
        elif isinstance(msg, Transcript):
            result.transcript = msg.text
            emit({"event": "transcript", "text": msg.text, "final": msg.final})
        elif isinstance(msg, ReplyText):
            if msg.final:
                result.reply_text = msg.text
                emit({"event": "reply_text", "text": msg.text})
                result.reply_audio = b"".join(chunks)
                done.set()
            else:
                sentence_of[msg.stream_id] = msg.text
                result.sentences.append(msg.text)
                emit({"event": "reply_sentence", "text": msg.text})
        elif isinstance(msg, AudioStop) and msg.reason == StopReason.ABORTED:
            result.aborted = True
        elif isinstance(msg, Ping):  # the gateway's idle check (server.session_idle_s): a silent box answers
            await ws.send(encode(Pong(nonce=msg.nonce)))
        elif isinstance(msg, Error):
            result.errors.append((msg.code, msg.text))
            emit({"event": "error", "code": msg.code, "text": msg.text})
        if isinstance(msg, Transcript) and not msg.text:
            done.set()  # heard noise, no words: nothing will follow


def load_input(wav: Path | None, say: str | None, synthesize: Callable[[str], tuple[np.ndarray, int]]) -> tuple[np.ndarray, int]:
    """The audio to send: a WAV file, or `say` spoken by the local TTS, with 0.3 s of lead-in silence."""
    if wav is not None:
        audio, rate = read_wav(wav)
    elif say:
        audio, rate = synthesize(say)
    else:
        raise SimulateError("give --wav FILE or --say TEXT")
    lead = np.zeros(int(0.3 * rate), np.float32)
    return np.concatenate([lead, audio]), rate


def to_rate(audio: np.ndarray, rate: int, target: int) -> np.ndarray:
    return resample(audio, rate, target)
