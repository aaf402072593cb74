"""One turn, published once: typed events of a device's conversation, and the publisher they go through.

The conversation publishes each event once, to its session's `TurnEvents`: first to the awaited
sinks, in order (the device's wire messages, gateway/voice/wire.py; the servo reset on a barge-in),
then on the event bus for everyone else (the LAN screens, `gateway bench`'s metrics, tools). A
sink is awaited before the next event is published, so what the device sees keeps the order of
the events. A reply's audio itself (each sentence's ReplyText, expression packets, AudioStart,
chunks, AudioStop) is data, streamed by the Speaker; `SentenceStarted` tells that a sentence began.

The events of a spoken turn, in order: `SpeechStarted`, `SpeechEnded`, `Transcribed`,
`SentenceStarted` per sentence played, then `ReplyEnded` and `TurnFinished` (its metrics). A barge-in
in the middle: `BargedIn`, `ReplyEnded(aborted=True)` with only what was played, `TurnFinished`.
A typed turn starts at `Transcribed`; an announcement (`Conversation.say`) has sentences and
`ReplyEnded` only. A turn that failed publishes `TurnFailed` instead of `ReplyEnded`.
`ListenChanged` tells when the device's listen state changes (listen.mode wake / follow-up: asleep,
listening in a follow-up window, woken by the wake word; gateway/voice/listen_mode.py).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from gateway.brain.contract import Sentence
from gateway.bus import EventBus


@dataclass
class TurnMetrics:
    """Latency breakdown of one turn, in milliseconds (see `gateway bench`)."""

    device_id: str
    utterance_ms: float = 0.0
    endpoint_wait_ms: float = 0.0  # trailing silence the endpointer waited for (audio time)
    asr_ms: float = 0.0  # decode compute time
    asr_after_endpoint_ms: float = 0.0  # how long the turn waited for ASR after the endpoint
    speculative: bool = False  # transcript came from the speculative decode
    speculative_reply: bool = False  # the brain was asked before the endpoint (gateway/voice/speculation.py)
    first_sentence_after_endpoint_ms: float = 0.0  # when the brain's first sentence was there (0: before)
    brain_ms: float = 0.0
    first_tts_ms: float = 0.0  # how long the first audio waited for its synthesis
    first_tts_prepared: bool = False  # that synthesis began on the speculative reply, before the endpoint
    endpoint_to_first_audio_ms: float = 0.0
    transcript: str = ""
    reply: str = ""
    barged_in: bool = False
    brain: str = ""  # who answered: the first sentence's source ("local", "memory", "llm"; "" none)


@dataclass(frozen=True)
class SpeechStarted:
    """The user started speaking, `audio_ms` into the device's microphone stream."""

    device_id: str
    audio_ms: int


@dataclass(frozen=True)
class SpeechEnded:
    """The utterance ended (the endpoint, or the device stopped its audio): it goes to the ASR."""

    device_id: str
    audio_ms: int


@dataclass(frozen=True)
class Transcribed:
    """What the user said (or typed); "" when speech had no words (no reply follows)."""

    device_id: str
    text: str


@dataclass(frozen=True)
class SentenceStarted:
    """A reply sentence begins to play as audio stream `stream_id` (before its ReplyText is sent)."""

    device_id: str
    stream_id: int
    sentence: Sentence


@dataclass(frozen=True)
class BargedIn:
    """The reply was interrupted (`reason`); `stream_id` is the audio stream it cut (None: none open)."""

    device_id: str
    reason: str
    stream_id: int | None


@dataclass(frozen=True)
class ReplyEnded:
    """The reply is over: `display` is what was shown of it, `speech` what was said (the sentences whose
    audio started; after a barge-in, `aborted`, only those)."""

    device_id: str
    display: str
    speech: str
    aborted: bool = False


@dataclass(frozen=True)
class TurnFailed:
    """The reply failed (`code` a stable error code, `text` for the device); the session goes on."""

    device_id: str
    code: str
    text: str


@dataclass(frozen=True)
class TurnFinished:
    """A turn that heard something is over (answered, interrupted or failed): its metrics."""

    device_id: str
    metrics: TurnMetrics


@dataclass(frozen=True)
class ListenChanged:
    """The device's listen state changed: `asleep` (a turn needs the wake word), `listening` (the next
    utterance is a turn without it), `woken` (the wake word `word` was heard: the question follows)."""

    device_id: str
    state: str
    word: str  # the wake-word model when woken, else ""
    audio_ms: int


TurnEvent = (SpeechStarted | SpeechEnded | Transcribed | SentenceStarted | BargedIn | ReplyEnded | TurnFailed
             | TurnFinished | ListenChanged)
Sink = Callable[[TurnEvent], Awaitable[None]]


class TurnEvents:
    """A session's publisher: each event to the `sinks` in order (awaited), then on the `bus`."""

    def __init__(self, sinks: Sequence[Sink] = (), bus: EventBus | None = None) -> None:
        self._sinks = tuple(sinks)
        self._bus = bus

    async def publish(self, event: TurnEvent) -> None:
        for sink in self._sinks:
            await sink(event)
        if self._bus is not None:
            self._bus.publish(event)


class WatchedEvents(TurnEvents):
    """A session's events as its turns publish them, each also shown to `watch` (after the inner
    publisher's sinks and bus): the conversation follows its replies' ends this way."""

    def __init__(self, inner: TurnEvents, watch: Callable[[TurnEvent], Awaitable[None]]) -> None:
        super().__init__()
        self._inner = inner
        self._watch = watch

    async def publish(self, event: TurnEvent) -> None:
        await self._inner.publish(event)
        await self._watch(event)
