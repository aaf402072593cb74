"""End to end in one gateway: a device's blood-pressure reading becomes a memory that the voice
box of the same user talks about, offline; every turn is remembered."""

from __future__ import annotations

import asyncio
import time

import pytest

from firmware_protocol import Action, Hello, ReadingAck, ReplyText, SensorReading, TextInput, Welcome
from gateway.voice.events import ReplyEnded
from gateway.mcp_server.devices import GatewayDevices
from gateway.memory.events import Alert
from gateway.memory.nodes import Node
from tests.memory.conftest import until


@pytest.mark.asyncio(loop_scope="session")
async def test_a_devices_blood_pressure_reading_is_what_the_voice_box_answers_with(gateway_with_memory) -> None:
    gateway, link = gateway_with_memory
    remembered = gateway.bus.subscribe(Node, name="test")  # the memory publishes each reading it remembers
    bp = link.connect()
    await bp.send(Hello(device_id="bp-anna"))
    assert isinstance(await until(bp, Welcome), Welcome)
    values = (("systolic", "mmHg", 152.0), ("diastolic", "mmHg", 93.0))
    await bp.send(SensorReading(1, "blood_pressure", int(time.time()) - 60, values))
    assert isinstance(await until(bp, ReadingAck), ReadingAck)
    node = await asyncio.wait_for(remembered.get(), 10)
    assert node.user_id == "anna" and "reading:blood_pressure" in node.tags
    box = link.connect()
    await box.send(Hello(device_id="box-anna"))
    await until(box, Welcome)
    await box.send(TextInput(text="My name is Anna"))
    assert "Anna" in (await until(box, ReplyText)).text
    await box.send(TextInput(text="What is my name?"))
    assert (await until(box, ReplyText)).text == "Your name is Anna."
    await box.send(TextInput(text="What was my last blood pressure reading?"))
    reply = (await until(box, ReplyText)).text
    assert "blood pressure 152 over 93 mmHg" in reply, reply
    await gateway.brain.drain()
    turns = await gateway.memory.recent("anna", 10, types=["conversation"])
    assert len(turns) == 3 and turns[0].content.startswith("User: What was my last blood pressure")


@pytest.mark.asyncio(loop_scope="session")
async def test_a_reading_above_a_rule_threshold_publishes_an_alert_for_the_users_devices(gateway_with_memory) -> None:
    gateway, link = gateway_with_memory
    await gateway.memory.remember("anna", "Blood pressure above 140/90: show it and tell Anna", kind="rule",
                                  persistent=True, extra_tags=["reading:blood_pressure", "above:140/90"])
    alerts = gateway.bus.subscribe(Alert, name="test")
    said = gateway.bus.subscribe(ReplyEnded, name="test-screens")  # what the LAN screens show
    box = link.connect()
    await box.send(Hello(device_id="box-anna"))
    await until(box, Welcome)
    bp = link.connect()
    await bp.send(Hello(device_id="bp-anna"))
    await until(bp, Welcome)
    await bp.send(SensorReading(5, "blood_pressure", int(time.time()) - 30, (("systolic", "mmHg", 161.0), ("diastolic", "mmHg", 99.0))))
    alert = await asyncio.wait_for(alerts.get(), 10)
    assert alert.user_id == "anna" and set(alert.devices) == {"bp-anna", "box-anna"}
    assert alert.text.endswith("(blood pressure 161 over 99 mmHg)")
    spoken = await until(box, ReplyText)  # the voice box says the alert
    assert spoken.text.startswith("Blood pressure above 140/90: show it and tell Anna")
    async with asyncio.timeout(5):  # ... and the screens get it as that device's reply text
        while (e := await said.get()).device_id != "box-anna":
            pass
    assert e.display == spoken.text
    said.close()


@pytest.mark.asyncio(loop_scope="session")
async def test_say_and_perform_action_reach_a_connected_device(gateway_with_memory) -> None:
    gateway, link = gateway_with_memory
    box = link.connect()
    await box.send(Hello(device_id="box-ben"))
    await until(box, Welcome)
    devices = GatewayDevices(gateway.registry)
    await devices.say("box-ben", "Dinner is ready. Come to the kitchen.")
    assert (await until(box, ReplyText)).text == "Dinner is ready. Come to the kitchen."
    await devices.perform_action("box-ben", "greeting.hello", "wave", "smile", 80)
    action = await until(box, Action)
    assert (action.code, action.behavior, action.affect, action.intensity) == ("greeting.hello", "wave", "smile", 80)
    with pytest.raises(ValueError, match="'attic' is not connected"):
        await devices.say("attic", "hello")
