"""The console's live conversation log: the recent turns of each device, as the bus tells them.

It follows one turn's events (gateway/voice/events.py) per device: `Transcribed` opens the turn
(what was said), each `SentenceExpressed` adds its sentence's audio (what the TTS made for the
device), `ReplyEnded` / `TurnFailed` give the reply shown (after a barge-in the audio keeps only the
sentences that began to play), `TurnFinished` its metrics (the latency
from the end of speech to the first reply audio, and which brain answered). Every change of a
turn is offered to the live listeners (the console's WebSocket, gateway/console/api_talk.py).

In cluster mode the turns of the devices other members serve come too (gateway/cluster/events.py):
the screens' messages of their transcript, sentences and reply end (`RemoteScreenMessage`) and the
turn's end with its latency and brain (`RemoteTurnFinished`). Such a turn names its member
(`gateway`) and keeps no audio: that stays on the member that synthesised it.

Bounded, in memory only: the last `per_device` turns of each device (of at most MAX_DEVICES
devices, the least recently heard forgotten first), each reply's audio at most MAX_REPLY_S
seconds, all audio together at most MAX_AUDIO_BYTES (the oldest turns lose their audio first);
another member's turns count in the same per-device and device bounds.
A listener that does not keep up loses its oldest updates (counted and logged), never slows a
device. The memory keeps the conversation itself (transcript and reply) for good.
"""

from __future__ import annotations

import asyncio
import io
import logging
import secrets
import time
import wave
from collections import OrderedDict, deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from gateway.bus import EventBus
from gateway.cluster.events import RemoteTurnFinished
from gateway.expression.service import SentenceExpressed
from gateway.screens.hub import RemoteScreenMessage
from gateway.voice.events import ReplyEnded, Transcribed, TurnFailed, TurnFinished

log = logging.getLogger(__name__)

MAX_DEVICES = 256
MAX_REPLY_S = 60.0
MAX_AUDIO_BYTES = 48 * 1024 * 1024
LISTENER_QUEUE = 64
MAX_REMOTE_SENTENCES = 200  # of one turn another member serves (the texts are kept, no audio)


@dataclass(eq=False)
class TalkTurn:
    id: str
    device_id: str
    person: str
    ts: float  # when the transcript was there (unix time)
    said: str
    answered: str = ""
    latency_ms: float | None = None  # end of speech -> first reply audio (None: no audio played)
    brain: str = ""  # "local", "memory", "llm" ("" when nothing answered)
    aborted: bool = False  # barged in
    failed: str = ""  # the error code of a failed reply
    done: bool = False  # TurnFinished was seen
    gateway: str = ""  # cluster mode: the member that served it ("" = this gateway; its audio stays there)
    rate: int = 0  # the reply audio's sample rate
    pcm: bytearray = field(default_factory=bytearray)  # int16 mono, the reply's sentences in order
    pieces: list[tuple[str, int]] = field(default_factory=list)  # (sentence text, its bytes in pcm)

    @property
    def audio_seconds(self) -> float:
        return len(self.pcm) / 2 / self.rate if self.rate else 0.0

    def as_dict(self) -> dict[str, Any]:
        audio = self.done and bool(self.pcm)
        return {"id": self.id, "device_id": self.device_id, "person": self.person, "ts": self.ts, "said": self.said,
                "answered": self.answered, "latency_ms": None if self.latency_ms is None else round(self.latency_ms),
                "brain": self.brain, "aborted": self.aborted, "failed": self.failed, "done": self.done,
                "audio_seconds": round(self.audio_seconds, 2) if audio else 0,
                "audio": f"talk/audio?id={self.id}" if audio else None, "gateway": self.gateway or None}

    def wav(self) -> bytes:
        out = io.BytesIO()
        with wave.open(out, "wb") as w:
            w.setnchannels(1)
            w.setsampwidth(2)
            w.setframerate(self.rate)
            w.writeframes(bytes(self.pcm))
        return out.getvalue()


class TalkLog:
    def __init__(self, person_of: Callable[[str], str], per_device: int, clock: Callable[[], float] = time.time) -> None:
        self._person_of = person_of
        self._per_device = per_device
        self._clock = clock
        self._devices: OrderedDict[str, deque[TalkTurn]] = OrderedDict()  # least recently heard first
        self._by_id: dict[str, TalkTurn] = {}
        self._open: dict[str, TalkTurn] = {}  # device -> the turn being answered
        self._audio_bytes = 0
        self._listeners: set[asyncio.Queue[dict[str, Any]]] = set()

    # ---- what the console asks ----
    def recent(self, person: str = "", device: str = "", n: int = 50) -> list[TalkTurn]:
        """The newest turns first, of one person and/or device (else everyone's)."""
        turns = [t for ts in self._devices.values() for t in ts
                 if (not device or t.device_id == device) and (not person or t.person == person)]
        return sorted(turns, key=lambda t: t.ts, reverse=True)[:n]

    def turn(self, turn_id: str) -> TalkTurn | None:
        return self._by_id.get(turn_id)

    @contextmanager
    def listen(self) -> Iterator[asyncio.Queue[dict[str, Any]]]:
        """A queue of every turn update (`TalkTurn.as_dict()`) while inside the block."""
        queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue(LISTENER_QUEUE)
        self._listeners.add(queue)
        try:
            yield queue
        finally:
            self._listeners.discard(queue)

    # ---- what the bus tells ----
    async def consume(self, bus: EventBus) -> None:
        sub = bus.subscribe(Transcribed, SentenceExpressed, ReplyEnded, TurnFailed, TurnFinished,
                            RemoteScreenMessage, RemoteTurnFinished, name="console-talk")
        try:
            async for event in sub:
                try:
                    self.on_event(event)
                except Exception:  # boundary: the Talk page's log must never take the gateway down
                    log.exception("console talk: an event could not be recorded: %r", type(event).__name__)
        finally:
            sub.close()

    def on_event(self, event: object) -> None:
        if isinstance(event, RemoteScreenMessage):
            self._remote_message(event.gateway, event.message)
            return
        if isinstance(event, RemoteTurnFinished):
            self._remote_finished(event)
            return
        if isinstance(event, Transcribed):
            if event.text:
                self._start(event.device_id, event.text)
            return
        if not isinstance(event, (SentenceExpressed, ReplyEnded, TurnFailed, TurnFinished)):
            return
        turn = self._open.get(event.device_id)
        if turn is None or turn.gateway:
            return  # an announcement, or a turn that began before the console listened (or elsewhere)
        if isinstance(event, SentenceExpressed):
            self._add_audio(turn, event.expression.text, event.pcm, event.sample_rate)
        elif isinstance(event, ReplyEnded):
            turn.answered, turn.aborted = event.display, event.aborted
            if event.aborted:
                self._keep_played(turn, event.speech)
        elif isinstance(event, TurnFailed):
            turn.failed, turn.answered = event.code, turn.answered or event.text
        elif isinstance(event, TurnFinished):
            m = event.metrics
            self._finish(turn, m.endpoint_to_first_audio_ms if m.endpoint_to_first_audio_ms > 0 else None, m.brain,
                         m.barged_in, m.reply)

    def _remote_message(self, gateway: str, message: dict[str, Any]) -> None:
        """A screens' message of a turn `gateway` serves (gateway/screens/fay.py): transcript, sentence, reply end."""
        data, device_id = message["Data"], message.get("Username")
        key, text = data.get("Key"), data.get("Text")
        if not isinstance(device_id, str) or not device_id or not isinstance(text, str):
            return  # an alert (every member has it from PostgreSQL), a listen state: not a turn's
        if key == "transcript":
            if text:
                self._start(device_id, text, gateway)
            return
        turn = self._open.get(device_id)
        if turn is None or turn.gateway != gateway:
            return  # a turn that began before the console listened
        if key == "audio":  # its sentences so far (no audio): the reply shown until its end comes
            if len(turn.pieces) < MAX_REMOTE_SENTENCES:
                turn.pieces.append((text, 0))
                turn.answered = " ".join(t for t, _ in turn.pieces)
        elif key == "reply_end":
            turn.answered = text or turn.answered
            self._offer(turn)

    def _remote_finished(self, event: RemoteTurnFinished) -> None:
        turn = self._open.get(event.device_id)
        if turn is None or turn.gateway != event.gateway:
            return
        self._finish(turn, event.latency_ms, event.brain, event.aborted, event.reply)

    def _finish(self, turn: TalkTurn, latency_ms: float | None, brain: str, aborted: bool, reply: str) -> None:
        """The turn's end (here or on another member): its figures; no longer open; offered."""
        turn.latency_ms, turn.brain = latency_ms, brain
        turn.aborted = turn.aborted or aborted
        turn.answered = turn.answered or reply
        turn.done = True
        del self._open[turn.device_id]
        self._offer(turn)

    def _start(self, device_id: str, said: str, gateway: str = "") -> None:
        if (previous := self._open.pop(device_id, None)) is not None:  # its end was never told
            previous.done = True
            self._offer(previous)
        turn = TalkTurn(secrets.token_urlsafe(12), device_id, self._person_of(device_id), self._clock(), said,
                        gateway=gateway)
        turns = self._devices.pop(device_id, None) or deque()
        self._devices[device_id] = turns  # the most recently heard last
        if len(turns) >= self._per_device:
            self._forget(turns.popleft())
        turns.append(turn)
        self._by_id[turn.id] = turn
        self._open[device_id] = turn
        while len(self._devices) > MAX_DEVICES:
            _, old = self._devices.popitem(last=False)
            for t in old:
                self._forget(t)
        self._offer(turn)

    def _forget(self, turn: TalkTurn) -> None:
        self._by_id.pop(turn.id, None)
        self._audio_bytes -= len(turn.pcm)
        turn.pcm, turn.pieces = bytearray(), []

    def _keep_played(self, turn: TalkTurn, speech: str) -> None:
        """After a barge-in: only the audio of the sentences that began to play (they are in `speech`,
        in order); a sentence synthesized ahead but never heard is dropped."""
        kept, at = 0, 0
        for text, size in turn.pieces:
            found = speech.find(text, at)
            if found < 0:
                break
            at, kept = found + len(text), kept + size
        self._audio_bytes -= len(turn.pcm) - kept
        del turn.pcm[kept:]

    def _add_audio(self, turn: TalkTurn, text: str, pcm: bytes, rate: int) -> None:
        if turn.rate and rate != turn.rate:
            log.warning("console talk: %s changed its audio rate within a reply (%d -> %d Hz); the rest not kept",
                        turn.device_id, turn.rate, rate)
            return
        turn.rate = rate
        room = int(MAX_REPLY_S * rate) * 2 - len(turn.pcm)
        piece = pcm[: max(0, room) // 2 * 2]
        turn.pcm += piece
        turn.pieces.append((text, len(piece)))
        self._audio_bytes += len(piece)
        if self._audio_bytes > MAX_AUDIO_BYTES:
            for old in sorted((t for ts in self._devices.values() for t in ts if t.pcm and t is not turn), key=lambda t: t.ts):
                self._audio_bytes -= len(old.pcm)
                old.pcm, old.pieces = bytearray(), []
                if self._audio_bytes <= MAX_AUDIO_BYTES:
                    break

    def _offer(self, turn: TalkTurn) -> None:
        update = turn.as_dict()
        for queue in list(self._listeners):
            if queue.full():
                queue.get_nowait()
                log.warning("console talk: a live page is slow; dropped an update")
            queue.put_nowait(update)
