"""The screen hub: fans the gateway's sentences, actions, visemes and transcripts out to LAN screens.

A screen subscribes to one device or all (`?device=ID`, default all; it may change its choice by
sending `{"device": "ID"}`, answered with `{"Topic": "gateway", "Data": {"Key": "subscribed",
"Device": ID}}`). Each screen has a bounded queue: a slow screen loses its oldest
messages (counted and logged), never slows down a device. The audio of the last `audio_cache`
sentences is kept in memory as WAV for `GET /audio/<id>.wav`, under random ids (nobody can
guess the next sentence's URL); the URLs sent to screens end with `audio_query` (the screen key).
In cluster mode the other members' devices' messages come as `RemoteScreenMessage` on the bus
(gateway/cluster/events.py) and go to the screens the same way (their sentences without audio).
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
import secrets
import wave
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from gateway.bus import EventBus
from gateway.expression.service import SentenceExpressed
from gateway.links.base import LinkClosed
from gateway.links.web import TextSocket
from gateway.log_safe import log_safe
from gateway.memory.events import Alert
from gateway.screens.fay import alert_message, for_screen, listen_message, sentence_message, text_message
from gateway.voice.events import ListenChanged, ReplyEnded, Transcribed

log = logging.getLogger(__name__)

ALL = "all"
TURN_EVENTS = (SentenceExpressed, Transcribed, ReplyEnded, ListenChanged, Alert)  # what screens show


@dataclass(frozen=True)
class RemoteScreenMessage:
    """Bus event, cluster mode: a screens' message of another member's device (gateway/cluster/events.py),
    fanned out to this gateway's screens like its own."""

    gateway: str
    message: dict[str, Any]


def wav_bytes(pcm: bytes, rate: int) -> bytes:
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(pcm)
    return out.getvalue()


class _Screen:
    def __init__(self, sock: TextSocket, device: str, maxsize: int) -> None:
        self.sock = sock
        self.device = device
        self.queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue(maxsize)
        self.dropped = 0

    def wants(self, message: dict[str, Any]) -> bool:
        if self.device in (ALL, message.get("Username")):
            return True
        devices = message["Data"].get("Devices") if message.get("Topic") == "human" else None
        return devices is not None and (not devices or self.device in devices)  # an alert: its devices

    def offer(self, message: dict[str, Any]) -> None:
        if not self.wants(message):
            return
        if self.queue.full():
            self.queue.get_nowait()
            self.dropped += 1
            log.warning("%s: slow screen, dropped a message (%d so far)", self.sock.peer, self.dropped)
        self.queue.put_nowait(message)


class TurnMessages:
    """The screens' messages of the turn events (gateway/screens/fay.py), keeping per device
    whether the next sentence starts a reply. Used by the hub and, in cluster mode, by the
    events shared with the other members (gateway/cluster/events.py)."""

    def __init__(self) -> None:
        self._fresh: dict[str, bool] = {}  # device -> the next sentence starts a reply

    def of(self, event: object, audio_path: str = "") -> dict[str, Any] | None:
        """The message for `event` (a SentenceExpressed's audio at `audio_path`), None for others."""
        if isinstance(event, SentenceExpressed):
            first = self._fresh.get(event.device_id, True)
            self._fresh[event.device_id] = False
            return sentence_message(event.device_id, event.stream_id, event.expression, audio_path, first)
        if isinstance(event, Transcribed):
            self._fresh[event.device_id] = True
            return text_message(event.device_id, "transcript", event.text) if event.text else None
        if isinstance(event, ReplyEnded):
            self._fresh[event.device_id] = True
            return text_message(event.device_id, "reply_end", event.display, is_end=True)
        if isinstance(event, ListenChanged):  # listen.mode wake / follow-up: asleep, listening, woken
            return listen_message(event.device_id, event.state, event.word)
        if isinstance(event, Alert):
            return alert_message(event.user_id, event.devices, event.text, event.severity, event.at)
        return None


class ScreenHub:
    def __init__(self, audio_cache: int = 64, queue_size: int = 64, audio_query: str = "") -> None:
        self._audio: OrderedDict[str, bytes] = OrderedDict()
        self._audio_cache = audio_cache
        self._queue_size = queue_size
        self._audio_query = audio_query
        self._screens: set[_Screen] = set()
        self._turns = TurnMessages()
        self.sent = 0

    @property
    def screens(self) -> int:
        return len(self._screens)

    def audio(self, audio_id: str) -> bytes | None:
        return self._audio.get(audio_id)

    def publish(self, message: dict[str, Any]) -> None:
        for screen in list(self._screens):
            screen.offer(message)

    def on_event(self, event: object) -> None:
        if isinstance(event, RemoteScreenMessage):  # cluster mode: another member's device
            self.publish(event.message)
            return
        audio_path = ""
        if isinstance(event, SentenceExpressed):
            number = secrets.token_urlsafe(16)
            self._audio[number] = wav_bytes(event.pcm, event.sample_rate)
            while len(self._audio) > self._audio_cache:
                self._audio.popitem(last=False)
            audio_path = f"/audio/{number}.wav{self._audio_query}"
        if (message := self._turns.of(event, audio_path)) is not None:
            self.publish(message)

    async def consume(self, bus: EventBus) -> None:
        sub = bus.subscribe(*TURN_EVENTS, RemoteScreenMessage, name="screens")
        try:
            async for event in sub:
                self.on_event(event)
        finally:
            sub.close()

    async def serve_screen(self, sock: TextSocket) -> None:
        screen = _Screen(sock, sock.query.get("device", ALL) or ALL, self._queue_size)
        self._screens.add(screen)
        log.info("%s: screen connected (device %s)", sock.peer, log_safe(screen.device))
        reader = asyncio.create_task(self._read(screen), name=f"screen {sock.peer} reader")
        getter: asyncio.Future[dict] | None = None
        try:
            while True:
                getter = asyncio.ensure_future(screen.queue.get())
                await asyncio.wait((getter, reader), return_when=asyncio.FIRST_COMPLETED)
                if not getter.done():  # the screen went away while nothing was queued for it
                    getter.cancel()
                    raise LinkClosed("screen closed")
                message = getter.result()
                await sock.send(json.dumps(for_screen(message, sock.host, "https" if sock.secure else "http"), ensure_ascii=False))
                self.sent += 1
        except LinkClosed:
            log.info("%s: screen disconnected", sock.peer)
        finally:  # both owned: ended (and the reader's failure logged) before the screen is forgotten
            pending = [t for t in (reader, getter) if t is not None]
            for task in pending:
                task.cancel()
            await asyncio.wait(pending)
            if not reader.cancelled() and (exc := reader.exception()) is not None:
                log.warning("%s: screen reader failed: %s", sock.peer, exc)
            self._screens.discard(screen)

    async def _read(self, screen: _Screen) -> None:
        try:
            while True:
                text = await screen.sock.receive()
                try:
                    choice = json.loads(text).get("device")
                except (ValueError, AttributeError):
                    log.warning("%s: bad-request: screens send {\"device\": ID or \"all\"}, got %.60r", screen.sock.peer, text)
                    continue
                if isinstance(choice, str) and choice:
                    screen.device = choice
                    screen.queue.put_nowait({"Topic": "gateway", "Data": {"Key": "subscribed", "Device": choice}})
        except LinkClosed:
            return
