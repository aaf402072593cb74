"""The device's side of the turn events: what each one sends over the wire contract.

`SpeechStarted`/`SpeechEnded` -> `VadEvent`; `Transcribed` -> the final `Transcript`; `BargedIn` ->
`AudioStop(ABORTED)` of the stream it cut; `ReplyEnded` -> the closing `ReplyText` (display text,
final); `TurnFailed` -> `Error`; `ListenChanged` -> `ListenState` (only to a device that announced
`LISTEN`). The rest (`SentenceStarted`, `TurnFinished`) sends nothing: a
sentence's own messages are the Speaker's audio stream.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from firmware_protocol import (AudioStop, Error, ListenState, ListenStateKind, Message, ReplyText, StopReason,
                               Transcript, VadEvent)
from gateway.voice.events import (BargedIn, ListenChanged, ReplyEnded, Sink, SpeechEnded, SpeechStarted,
                                  Transcribed, TurnEvent, TurnFailed)

Send = Callable[[Message], Awaitable[None]]


def wire_messages(event: TurnEvent) -> list[Message]:
    """The messages `event` sends to its device, in order."""
    if isinstance(event, SpeechStarted):
        return [VadEvent(event=VadEvent.SPEECH_START, audio_ms=event.audio_ms)]
    if isinstance(event, SpeechEnded):
        return [VadEvent(event=VadEvent.SPEECH_END, audio_ms=event.audio_ms)]
    if isinstance(event, Transcribed):
        return [Transcript(text=event.text, final=True)]
    if isinstance(event, BargedIn):
        return [] if event.stream_id is None else [AudioStop(stream_id=event.stream_id, reason=StopReason.ABORTED)]
    if isinstance(event, ReplyEnded):
        return [ReplyText(text=event.display, final=True)]
    if isinstance(event, TurnFailed):
        return [Error(code=event.code, text=event.text)]
    if isinstance(event, ListenChanged):
        return [ListenState(ListenStateKind[event.state.upper()], event.word, event.audio_ms)]
    return []


def to_device(send: Send, listen_state: bool = False) -> Sink:
    """A sink that sends each event's messages with `send` (awaited, in order); ListenState only
    with `listen_state` (the device announced the LISTEN capability)."""

    async def sink(event: TurnEvent) -> None:
        if isinstance(event, ListenChanged) and not listen_state:
            return
        for message in wire_messages(event):
            await send(message)

    return sink
