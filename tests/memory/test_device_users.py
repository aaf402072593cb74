"""A device that memory.users does not map gets a memory user of its own: a brand-new device
never answers "What is my name?" with another person's name."""

from __future__ import annotations

import re

import pytest

from firmware_protocol import Hello, ReplyText, TextInput, Welcome
from gateway.memory.device_users import device_user, user_of
from tests.memory.conftest import until


def test_an_unmapped_device_is_its_own_user_and_a_mapped_one_its_persons():
    users = {"box-anna": "anna"}
    assert user_of("box-anna", users, "household", True) == "anna"
    assert user_of("box-new", users, "household", True) == "device.box-new"
    assert user_of("box-new", users, "household", False) == "household"  # isolate_by_user off: one shared memory


def test_device_ids_the_user_format_cannot_hold_get_a_stable_hashed_user():
    long_id, colon_id = "x" * 64, "sensor:kitchen"
    for device_id in (long_id, colon_id):
        user = device_user(device_id)
        assert re.fullmatch(r"[A-Za-z0-9_.@-]{1,64}", user) and user == device_user(device_id)  # a valid user id
    assert device_user(long_id) != device_user("x" * 63) and device_user(colon_id) != device_user("sensor_kitchen")


async def say(link, device_id: str, text: str) -> str:
    box = link.connect()
    await box.send(Hello(device_id=device_id))
    await until(box, Welcome)
    await box.send(TextInput(text=text))
    reply = (await until(box, ReplyText)).text
    await box.close()
    return reply


@pytest.mark.asyncio(loop_scope="session")
async def test_what_is_my_name_from_a_new_device_never_answers_with_another_persons_name(gateway_with_memory):
    gateway, link = gateway_with_memory
    assert "Anna" in await say(link, "box-anna", "My name is Anna")  # mapped to anna
    assert "Ben" in await say(link, "box-guest", "My name is Ben")  # unmapped: its own user
    await gateway.brain.drain()
    assert await say(link, "box-new", "What is my name?") == (
        "You have not told me your name yet. Say: my name is, and then your name.")
    assert await say(link, "box-guest", "What is my name?") == "Your name is Ben."
    assert await say(link, "box-anna", "What is my name?") == "Your name is Anna."
    assert gateway.memory.user_for("box-guest") == "device.box-guest"
