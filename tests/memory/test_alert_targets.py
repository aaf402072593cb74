"""Spoken alerts go only to connected devices that announced audio output in their Hello; when a
user has none, that is logged and the alert stays in their memory."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from firmware_protocol import AudioStart, Capability, Hello, Ping, Pong, ReadingAck, ReplyText, SensorReading, Welcome
from gateway.app import Gateway
from gateway.bus import EventBus
from gateway.devices.registry import SessionRegistry
from gateway.links.memory import MemoryLink
from gateway.memory.alerts import speak_alerts
from gateway.memory.events import Alert
from tests.memory.conftest import until

SENSOR_ONLY = Capability.SENSOR
SCREEN_ONLY = Capability.SCREEN | Capability.TEXT


class _Conn:
    def __init__(self, peer: str) -> None:
        self.peer = peer

    async def close(self, reason: str = "") -> None:
        pass


def _alert(text: str, *devices: str) -> Alert:
    return Alert("anna", devices, text, 1, "warning", 0.0)


@pytest.fixture
async def registry():
    reg = SessionRegistry()
    async with reg.register("box-anna", _Conn("a"), object()), \
            reg.register("bp-anna", _Conn("b"), object(), SENSOR_ONLY), \
            reg.register("screen-anna", _Conn("c"), object(), SCREEN_ONLY), \
            reg.register("box-kitchen", _Conn("d"), object()):
        yield reg


async def _speak(registry: SessionRegistry, alerts: list[Alert]) -> list[tuple[str, str]]:
    """Publish `alerts` and return what was said, once the last alert (which must be spoken) is."""
    bus = EventBus()
    said: list[tuple[str, str]] = []
    last = asyncio.Event()

    async def say(device: str, text: str) -> None:
        said.append((device, text))
        if text == alerts[-1].text:
            last.set()

    task = asyncio.create_task(speak_alerts(bus.subscribe(Alert), registry.connected, say, registry.can_speak))
    try:
        for alert in alerts:
            bus.publish(alert)
        await asyncio.wait_for(last.wait(), 5)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    return said


def test_the_registry_knows_which_connected_devices_can_speak(registry):
    assert [d for d in registry.connected() if registry.can_speak(d)] == ["box-anna", "box-kitchen"]
    assert not registry.can_speak("not-connected")


async def test_an_alert_is_spoken_only_on_the_users_devices_with_audio_output(registry):
    said = await _speak(registry, [_alert("Rest now.", "bp-anna", "screen-anna", "box-anna", "box-gone")])
    assert said == [("box-anna", "Rest now.")]


async def test_an_alert_for_no_device_in_particular_goes_to_every_connected_speaking_device(registry):
    said = await _speak(registry, [_alert("Fire drill at noon.")])
    assert sorted(said) == [("box-anna", "Fire drill at noon."), ("box-kitchen", "Fire drill at noon.")]


async def test_a_user_without_a_speaking_device_connected_is_logged_and_nothing_is_said(registry, caplog):
    with caplog.at_level(logging.WARNING, logger="gateway.memory.alerts"):
        said = await _speak(registry, [_alert("Measure now.", "bp-anna", "screen-anna"),
                                       _alert("Later one.", "box-anna")])  # handled in order, after the first
    assert said == [("box-anna", "Later one.")]
    assert ("alert for anna not spoken: no device of theirs that can speak is connected (connected without "
            "audio output: bp-anna, screen-anna); it stays in their memory: Measure now.") in caplog.text


async def test_saying_something_on_a_device_without_audio_output_is_refused_with_the_reason(registry):
    from gateway.mcp_server.devices import DeviceUnavailable, GatewayDevices

    with pytest.raises(DeviceUnavailable, match="'bp-anna' cannot speak: it did not announce audio output"):
        await GatewayDevices(registry).say("bp-anna", "hello")


@pytest_asyncio.fixture(loop_scope="session")
async def gateway_with_memory(gateway_with_memory) -> AsyncIterator[tuple[Gateway, MemoryLink]]:
    """The shared running gateway, with Anna's blood-pressure rule in her memory."""
    gateway, _link = gateway_with_memory
    await gateway.memory.remember("anna", "Blood pressure above 140/90: tell Anna", kind="rule", persistent=True,
                                  extra_tags=["reading:blood_pressure", "above:140/90"])
    yield gateway_with_memory


def _high(seq: int, systolic: float) -> SensorReading:
    return SensorReading(seq, "blood_pressure", int(time.time()) - 30, (("systolic", "mmHg", systolic), ("diastolic", "mmHg", 95.0)))


@pytest.mark.asyncio(loop_scope="session")
async def test_a_gateway_speaks_a_reading_alert_on_the_voice_box_and_not_on_the_sensor(gateway_with_memory, caplog) -> None:
    gateway, link = gateway_with_memory
    alerts = gateway.bus.subscribe(Alert, name="test")
    bp = link.connect()
    await bp.send(Hello(device_id="bp-anna", capabilities=SENSOR_ONLY))
    await until(bp, Welcome)
    with caplog.at_level(logging.WARNING, logger="gateway.memory.alerts"):
        await bp.send(_high(1, 165))  # only the sensor is connected: nobody can say it
        await until(bp, ReadingAck)
        assert "165 over 95" in (await asyncio.wait_for(alerts.get(), 10)).text
        box = link.connect()
        await box.send(Hello(device_id="box-anna"))
        await until(box, Welcome)
        await bp.send(_high(2, 170))
        spoken = await until(box, ReplyText)  # alerts are handled in order: the first one is done
    assert spoken.text.startswith("Blood pressure above 140/90: tell Anna") and "170 over 95" in spoken.text
    assert "alert for anna not spoken: no device of theirs that can speak is connected (connected without " \
           "audio output: bp-anna); it stays in their memory" in caplog.text
    await bp.send(Ping(nonce=7))
    got = []
    async with asyncio.timeout(10):
        while not isinstance(msg := await bp.receive(), Pong):
            got.append(msg)
    assert not [m for m in got if isinstance(m, (AudioStart, ReplyText))], got  # the sensor was never spoken to
    kept = await gateway.memory.recent("anna", 5, any_of=["alert:*"])
    assert sorted("165 over 95" in k.content for k in kept) == [False, True]  # both alerts are in memory
    alerts.close()
