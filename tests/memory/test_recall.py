"""The brain answers from memory, offline: names, sensor readings, remembered facts."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from gateway.config import parse_config
from gateway.memory.readings import describe_reading, remember_reading
from gateway.brain.memory import MemoryBrain
from gateway.memory.service import MemoryService
from gateway.brain.contract import BrainContext
from gateway.brain.local import LocalBrain
from tests.conftest import ROOT

TZ = ZoneInfo("Europe/Berlin")
NOW = datetime(2026, 11, 30, 10, 30, tzinfo=TZ)


@dataclass(frozen=True)
class Reading:  # the shape of gateway.devices.readings.ReadingStored (the bus event)
    reading_id: int
    device_id: str
    kind: str
    values: dict[str, float]
    units: dict[str, str]
    measured_at: datetime


def brain(memory: MemoryService) -> MemoryBrain:
    return MemoryBrain(LocalBrain.from_config(parse_config({}, ROOT)), memory)


async def say(b: MemoryBrain, text: str, device: str = "box-anna") -> str:
    reply = " ".join([s.speech async for s in b.session(device).reply(text, BrainContext(device, NOW))])
    await b.drain()
    return reply


async def test_the_brain_remembers_the_users_name_and_says_it_back(memory: MemoryService) -> None:
    b = brain(memory)
    assert "Anna" in await say(b, "Hello, my name is Anna")
    assert await say(b, "What is my name?") == "Your name is Anna."
    assert "not told me your name" in await say(b, "What is my name?", device="box-ben")


async def test_every_turn_is_written_as_a_conversation_node(memory: MemoryService) -> None:
    b = brain(memory)
    await say(b, "What time is it?")
    [node] = await memory.recent("anna", 5, types=["conversation"])
    assert node.content.startswith("User: What time is it?\nAssistant: It is")
    assert "source:box-anna" in node.tags


async def test_this_mornings_blood_pressure_comes_from_the_stored_reading(memory: MemoryService) -> None:
    b = brain(memory)
    morning = NOW.replace(hour=7, minute=15)
    await remember_reading(memory, Reading(1, "bp-anna", "blood_pressure", {"systolic": 158, "diastolic": 95, "pulse": 72},
                                           {"systolic": "mmHg", "diastolic": "mmHg", "pulse": "bpm"}, morning - timedelta(days=1)))
    await remember_reading(memory, Reading(2, "bp-anna", "blood_pressure", {"systolic": 132, "diastolic": 84},
                                           {"systolic": "mmHg", "diastolic": "mmHg"}, morning))
    await remember_reading(memory, Reading(3, "bp-anna", "body_temperature", {"value": 36.9}, {"value": "°C"}, morning))
    reply = await say(b, "What was my blood pressure this morning?")
    assert reply == "Measured at 7:15 AM today: blood pressure 132 over 84 mmHg."
    assert "158 over 95" in await say(b, "What was my blood pressure yesterday?")
    assert "no readings" in await say(b, "What was my blood pressure this morning?", device="box-ben")


def test_readings_are_described_in_speakable_words() -> None:
    assert describe_reading("temperature", {"value": 21.5}, {"value": "°C"}) == "temperature 21.5 °C"
    assert describe_reading("heart_rate", {"bpm": 64}, {}) == "bpm 64"
