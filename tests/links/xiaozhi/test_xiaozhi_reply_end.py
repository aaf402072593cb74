"""`tts stop` leaves only once the box has played the reply it was sent.

Firmware 1.9 and 2.0 in auto mode turn to listening on `tts stop` and reset their decoder, dropping
what is still queued (main/application.cc, AudioService::EnableVoiceProcessing -> ResetDecoder):
a stop sent with the last packet cut the end of every reply (~360 ms, measured with the box
emulator's `truncated_ms`). Timed on a clock the test moves: the sleeps BoxReply asks for advance
it, so nothing here depends on the machine's speed."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import numpy as np
import pytest

from gateway.audio.opus import OpusEncoder
from gateway.audio.pcm import float_to_s16le
from gateway.links.xiaozhi.emotions import EmotionTable
from gateway.links.xiaozhi.reply import BoxReply

pytestmark = pytest.mark.asyncio(loop_scope="session")

RATE, FRAME_MS = 24000, 60


class Box:
    """The channel to the box: what was sent, at which time of the test's clock."""

    def __init__(self) -> None:
        self.now = 100.0
        self.sent: list[tuple[float, str]] = []  # (time, "audio" | the tts state)
        self.meanwhile: list[Callable[[], Awaitable[None]]] = []  # run during the next long sleeps

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        if seconds > FRAME_MS / 1000 and self.meanwhile:
            await self.meanwhile.pop(0)()
        self.now += seconds

    async def send_json(self, msg: dict[str, Any]) -> None:
        self.sent.append((self.now, msg.get("state", msg["type"])))

    async def send_audio(self, packet: bytes, timestamp_ms: int) -> None:
        self.sent.append((self.now, "audio"))


def _reply(box: Box, max_ahead_ms: int = 1200) -> BoxReply:
    reply = BoxReply(box, FRAME_MS, max_ahead_ms, EmotionTable(), clock=box.clock, sleep=box.sleep)  # type: ignore[arg-type]
    reply.encoder = OpusEncoder(RATE, FRAME_MS)
    return reply


def _speech(seconds: float) -> bytes:
    t = np.arange(int(RATE * seconds)) / RATE
    return float_to_s16le((0.3 * np.sin(2 * np.pi * 220 * t)).astype(np.float32))


def _played_at(box: Box) -> float:
    """When a box that plays each packet from its arrival in real time has played them all."""
    ends = 0.0
    for at, what in box.sent:
        if what == "audio":
            ends = max(ends, at) + FRAME_MS / 1000
    return ends


async def test_tts_stop_waits_until_a_burst_of_reply_audio_has_been_played() -> None:
    box = Box()
    reply = _reply(box)
    await reply.sentence("s1", "It is three o'clock.")
    await reply.audio_start("s1")
    await reply.audio(_speech(1.0))  # sent at once (within max_ahead): ~1 s queued on the box
    await reply.audio_stop(aborted=False)
    await reply.end("s1")
    states = [what for _, what in box.sent if what != "audio"]
    assert states[0] == "start" and states[-1] == "stop"
    stop_at = box.sent[-1][0]
    assert box.sent[-2][1] == "audio"
    assert stop_at >= _played_at(box)  # not while the box still had audio queued
    assert stop_at - _played_at(box) <= FRAME_MS / 1000 + 1e-9  # and no later than a frame after


async def test_tts_stop_waits_for_the_audio_the_pacing_left_queued() -> None:
    box = Box()
    reply = _reply(box, max_ahead_ms=300)  # a long reply: paced, 300 ms ahead of the box's playback
    await reply.sentence("s1", "A long answer.")
    await reply.audio_start("s1")
    await reply.audio(_speech(3.0))
    await reply.audio_stop(aborted=False)
    last_audio = max(at for at, what in box.sent if what == "audio")
    await reply.end("s1")
    stop_at = box.sent[-1][0]
    assert box.sent[-1][1] == "stop"
    assert stop_at >= _played_at(box) > last_audio + 0.2  # ~300 ms were still queued


async def test_a_reply_that_never_spoke_sends_no_stop() -> None:
    box = Box()
    await _reply(box).end("s1")
    assert box.sent == []


async def test_a_reply_that_starts_while_the_last_one_is_still_playing_is_not_stopped_by_it() -> None:
    box = Box()
    reply = _reply(box)

    async def next_reply() -> None:  # (a realtime-mode turn answered while the box still plays)
        await reply.sentence("s1", "And another thing.")
        await reply.audio_start("s1")

    await reply.sentence("s1", "It is three o'clock.")
    await reply.audio_start("s1")
    await reply.audio(_speech(1.0))
    await reply.audio_stop(aborted=False)
    box.meanwhile.append(next_reply)
    await reply.end("s1")  # the first reply's end, while the box is still playing it
    states = [what for _, what in box.sent if what != "audio"]
    assert states == ["start", "sentence_start", "start", "sentence_start"]  # no stop: the box keeps speaking
    await reply.audio(_speech(0.5))
    await reply.audio_stop(aborted=False)
    await reply.end("s1")
    assert [what for _, what in box.sent if what != "audio"][-1] == "stop"
    assert box.sent[-1][0] >= _played_at(box)
