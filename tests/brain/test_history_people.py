"""The LLM brain's conversation history follows the live device -> person mapping (DevicePeople,
changed from the console): a device given to a person continues that person's conversation."""

from __future__ import annotations

from gateway.brain.cloud import CloudBrain
from gateway.memory.device_users import DevicePeople

from tests.brain.test_cloud_brain import local


def test_a_device_given_to_a_person_continues_their_history_from_then_on() -> None:
    people = DevicePeople({"box-anna": "anna"})
    brain = CloudBrain(local(), [], users=people)
    anna, own = brain.history("box-anna"), brain.history("cuff-1")
    assert anna is not own
    people.set("cuff-1", "anna")  # as POST devices/person does
    assert brain.history("cuff-1") is anna
    people.set("cuff-1", "")  # its own memory again
    assert brain.history("cuff-1") is own
