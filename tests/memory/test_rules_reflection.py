"""Rules fire alerts, reflections and portraits are written on schedule (injected clock)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from gateway.memory.events import Alert
from gateway.memory.readings import remember_reading
from gateway.memory.reflection import portrait, reflect
from gateway.memory.rules import RuleEngine, crosses
from gateway.memory.scheduler import MemoryScheduler
from gateway.memory.service import MemoryService

TZ = ZoneInfo("Europe/Berlin")
DAY1 = datetime(2026, 11, 30, 6, 0, tzinfo=TZ)
BP_UNITS = {"systolic": "mmHg", "diastolic": "mmHg"}


@dataclass(frozen=True)
class Reading:
    reading_id: int
    device_id: str
    kind: str
    values: dict[str, float]
    units: dict[str, str]
    measured_at: datetime


def engine(memory: MemoryService, alerts: list[Alert]) -> RuleEngine:
    return RuleEngine(memory, alerts.append, lambda user: ("box-anna",) if user == "anna" else ())


async def bp(memory: MemoryService, at: datetime, sys_: float, dia: float, seq: int = 1):
    return await remember_reading(memory, Reading(seq, "bp-anna", "blood_pressure",
                                                  {"systolic": sys_, "diastolic": dia}, BP_UNITS, at))


def test_a_limit_is_crossed_when_any_part_is_above_it() -> None:
    assert crosses("140/90", [152, 80]) and crosses("140/90", [120, 95]) and not crosses("140/90", [140, 90])
    assert crosses("38", [38.5]) and not crosses("nonsense", [500])


async def test_a_reading_above_the_threshold_rule_fires_a_warning_for_the_users_devices(
        memory: MemoryService, clock) -> None:
    clock.now = DAY1.timestamp()
    await memory.remember("anna", "Blood pressure above 140/90: tell Anna to rest and call the nurse", kind="rule",
                          persistent=True, extra_tags=["reading:blood_pressure", "above:140/90", "domain:homecare"])
    alerts: list[Alert] = []
    rules = engine(memory, alerts)
    assert await rules.on_reading(await bp(memory, DAY1, 128, 82)) == []
    [alert] = await rules.on_reading(await bp(memory, DAY1, 152, 93, seq=2))
    assert alert.text == ("Blood pressure above 140/90: tell Anna to rest and call the nurse "
                          "(blood pressure 152 over 93 mmHg)")
    assert (alert.user_id, alert.devices, alert.severity) == ("anna", ("box-anna",), "warning") and alerts == [alert]
    [kept] = await memory.recent("anna", 1, any_of=["alert:*"])
    assert kept.content.startswith("Alert: Blood pressure above") and "domain:homecare" in kept.tags
    assert await rules.on_reading(await bp(memory, DAY1, 150, 95)) != []  # ben's rules never apply to anna...
    assert await engine(memory, []).on_reading(await remember_reading(memory, Reading(
        3, "box-ben", "blood_pressure", {"systolic": 180, "diastolic": 100}, BP_UNITS, DAY1))) == []  # ...nor hers to ben


async def test_no_reading_by_the_deadline_reminds_once_a_day(memory: MemoryService, clock) -> None:
    clock.now = DAY1.timestamp()
    await memory.remember("anna", "Remind Anna to measure her blood pressure", kind="rule", persistent=True,
                          extra_tags=["reading:blood_pressure", "schedule:before:09:00"])
    alerts: list[Alert] = []
    rules = engine(memory, alerts)
    assert await rules.check_deadlines(DAY1.replace(hour=8, minute=59)) == []
    [alert] = await rules.check_deadlines(DAY1.replace(hour=9, minute=0))
    assert (alert.text, alert.severity) == ("Remind Anna to measure her blood pressure", "reminder")
    assert await rules.check_deadlines(DAY1.replace(hour=9, minute=30)) == []  # once per day
    day2 = DAY1 + timedelta(days=1)
    await bp(memory, day2.replace(hour=7), 120, 80)
    assert await rules.check_deadlines(day2.replace(hour=9, minute=5)) == []  # measured in time
    assert rules.next_deadline(day2.replace(hour=10), await memory.active_rules("anna")) == \
        (day2 + timedelta(days=1)).replace(hour=9, minute=0)


async def test_reflection_turns_the_day_into_insights_that_inherit_tags_and_point_at_sources(
        memory: MemoryService, clock) -> None:
    clock.now = DAY1.timestamp()
    nodes = [await bp(memory, DAY1 + timedelta(hours=h), s, d, seq=h) for h, s, d in ((0, 158, 95), (4, 138, 86), (8, 148, 95))]
    for q in ("how is my garden doing", "should I water the garden", "the garden tomatoes are red"):
        await memory.remember_turn("anna", q, "Nice.", "box-anna")
    insights = await reflect(memory, "anna", DAY1 + timedelta(hours=10))
    texts = [i.content for i in insights]
    assert texts[0] == "blood pressure: 3 readings in the last day, average 148/92, highest 158/95; 2 above 140/90."
    assert texts[1].startswith("Talked about most in the last day: garden")
    assert insights[0].type == "reflection" and set(insights[0].pointer_ids) == {n.id for n in nodes}
    assert insights[0].tags == ("domain:homecare", "kind:insight", "reading:blood_pressure", "source:reflection")
    assert [r.id for r in await memory.reflections("anna")] == [insights[1].id, insights[0].id]
    text = await portrait(memory, "anna", DAY1 + timedelta(hours=11))
    assert "Recent insights: " in text and "3 conversation turns, 3 sensor readings" in text
    assert (await memory.profile("anna"))["portrait"] == text


async def test_the_scheduler_runs_portrait_reflection_and_reminders_at_their_times(
        memory: MemoryService, clock) -> None:
    clock.now = DAY1.timestamp()
    await memory.remember("anna", "Measure blood pressure", kind="rule", persistent=True,
                          extra_tags=["reading:blood_pressure", "schedule:before:09:00"])
    alerts: list[Alert] = []
    fake_now = [DAY1]
    sleeps: list[float] = []

    async def fake_sleep(seconds: float) -> None:  # the injected clock moves instead of waiting
        sleeps.append(seconds)
        fake_now[0] += timedelta(seconds=seconds)
        if fake_now[0] > DAY1 + timedelta(days=1):
            raise asyncio.CancelledError

    sched = MemoryScheduler(memory, engine(memory, alerts), now=lambda: fake_now[0], sleep=fake_sleep)
    with pytest.raises(asyncio.CancelledError):
        await sched.run()
    assert [a.severity for a in alerts] == ["reminder"]
    assert (await memory.profile("anna"))["portrait"].startswith("Portrait of anna")
    assert max(sleeps) <= 900  # wakes at least every 15 minutes to see new rules


async def test_rules_from_the_config_are_written_once_and_fire(memory: MemoryService, clock) -> None:
    from gateway.config import parse_config
    from gateway.memory.rules import install_rules

    clock.now = DAY1.timestamp()
    cfg = parse_config({"memory": {"rules": [
        {"user": "anna", "text": "Your blood pressure is high. Please rest.", "reading": "blood_pressure", "above": "140/90"},
        {"user": "anna", "text": "Please measure your blood pressure.", "reading": "blood_pressure", "before": "09:00"}]}})
    assert len(await install_rules(memory, cfg.memory.rules)) == 2
    assert await install_rules(memory, cfg.memory.rules) == []  # the next start adds nothing
    alerts: list[Alert] = []
    [alert] = await engine(memory, alerts).on_reading(await bp(memory, DAY1, 150, 80))
    assert alert.text == "Your blood pressure is high. Please rest. The reading: blood pressure 150 over 80 mmHg."


def test_a_config_rule_needs_exactly_one_condition() -> None:
    from gateway.config import parse_config
    from gateway.errors import ConfigError

    with pytest.raises(ConfigError, match="exactly one of above"):
        parse_config({"memory": {"rules": [{"user": "anna", "text": "x", "reading": "blood_pressure"}]}})
    with pytest.raises(ConfigError, match="memory.rules.0.above"):
        parse_config({"memory": {"rules": [{"user": "a", "text": "x", "reading": "bp", "above": "high"}]}})
