"""An announcement (an alert, the MCP say tool) that cannot be said is not lost silently: the real
Replier and Speaker over an EngineRunner whose TTS fails log it at once, with the device and the
traceback, and publish `TurnFailed` (an Error to the device), like a failed reply."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator

import pytest

from firmware_protocol import AudioFormat, Error, Message
from gateway.engines.base import SynthChunk
from gateway.engines.fake import FakeAsr, FakeTts, FakeVad
from gateway.engines.runner import EngineRunner
from gateway.voice.events import TurnEvent, TurnEvents, TurnFailed
from gateway.voice.replier import Replier
from gateway.voice.speaker import Speaker
from gateway.voice.wire import to_device
from tests.voice.scripted_brain import ScriptedBrain

pytestmark = pytest.mark.asyncio(loop_scope="session")
ALERT = "Your blood pressure is high, please sit down."


class BrokenTts(FakeTts):
    def synthesize(self, text: str) -> Iterator[SynthChunk]:
        raise RuntimeError("piper: voice model failed")


class Events:
    """A sink keeping the turn events, with a bounded wait for the first of a kind."""

    def __init__(self) -> None:
        self.seen: list[TurnEvent] = []
        self._changed = asyncio.Condition()

    async def __call__(self, event: TurnEvent) -> None:
        async with self._changed:
            self.seen.append(event)
            self._changed.notify_all()

    async def first(self, kind: type, timeout: float = 10) -> TurnEvent:
        async with asyncio.timeout(timeout), self._changed:
            await self._changed.wait_for(lambda: any(isinstance(e, kind) for e in self.seen))
        return next(e for e in self.seen if isinstance(e, kind))


@pytest.fixture
def broken_runner() -> Iterator[EngineRunner]:
    runner = EngineRunner(FakeVad(), FakeAsr(), BrokenTts())
    yield runner
    runner.close()


def replier(runner: EngineRunner, send, sinks) -> Replier:
    speaker = Speaker(runner, send, AudioFormat(sample_rate=16000), 40, 200, who="alert-box")
    brain = ScriptedBrain(lambda utterance: [])  # an announcement asks no brain
    return Replier("alert-box", "test peer", brain, speaker, TurnEvents(sinks))


async def wait_for_record(caplog, level: int, text: str, timeout: float = 10) -> logging.LogRecord:
    async with asyncio.timeout(timeout):
        while not (found := [r for r in caplog.records if r.levelno == level and text in r.getMessage()]):
            await asyncio.sleep(0.01)
    return found[0]


async def test_an_announcement_whose_tts_fails_is_logged_and_published_as_turn_failed(broken_runner, caplog) -> None:
    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    events = Events()
    box = replier(broken_runner, send, [to_device(send), events])
    with caplog.at_level(logging.INFO, logger="gateway.voice.replier"):
        await box.announce(ALERT)
        failed = await events.first(TurnFailed)
    assert failed.device_id == "alert-box" and failed.code == "internal-error"
    assert "voice model failed" in failed.text
    assert Error(code="internal-error", text=failed.text) in sent  # the device hears of it
    line = await wait_for_record(caplog, logging.ERROR, "(alert-box): internal-error: the announcement")
    assert "test peer" in line.getMessage() and "blood pressure is high" in line.getMessage()
    assert line.exc_info is not None and "voice model failed" in str(line.exc_info[1])
    await box.close()


async def test_an_announcement_to_a_closed_link_is_logged_though_the_device_cannot_hear_of_it(fake_runner, caplog) -> None:
    async def send(message: Message) -> None:
        raise ConnectionResetError("the device's connection is gone")

    events = Events()
    box = replier(fake_runner, send, [to_device(send), events])  # the wire first, as a session's
    with caplog.at_level(logging.INFO, logger="gateway.voice.replier"):
        await box.announce(ALERT)
        line = await wait_for_record(caplog, logging.ERROR, "(alert-box): internal-error: the announcement")
        unsent = await wait_for_record(caplog, logging.WARNING, "internal-error not reported to the device")
    assert line.exc_info is not None and isinstance(line.exc_info[1], ConnectionResetError)
    assert "connection is gone" in unsent.getMessage()
    await box.close()
