"""The console's Devices (a device's person) and Memory (rules with their firings, the portrait
and the reflection) APIs against a running gateway with real databases and the real memory:
every new route refuses without a session and a same-origin CSRF write; a device mapped to a
person from the console speaks with that person's memory and the mapping is stored; rules are
checked like gateway.yaml's, fire on a reading over the threshold sent through the gateway, can be
disabled, changed (keeping their firings) and deleted; the reflection runs on demand."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest

from firmware_protocol import SensorReading
from gateway.devices.people import load_people

from tests.console.conftest import Client

pytestmark = pytest.mark.asyncio(loop_scope="session")

READS = ["rules?person=mallory", "profile?person=mallory"]
WRITES = [("rules", {"person": "mallory", "text": "x", "reading": "temperature", "above": "1"}),
          ("rules/update", {"person": "mallory", "id": 1, "text": "x", "reading": "temperature", "above": "1"}),
          ("rules/enable", {"person": "mallory", "id": 1, "enabled": False}),
          ("rules/delete", {"person": "mallory", "id": 1}),
          ("profile/reflect", {"person": "mallory"}),
          ("devices/person", {"device_id": "mallory-box", "person": "mallory"})]


async def _wait_for(fetch, condition, timeout: float = 15.0):
    """Poll until `condition(answer)` (bounded: the memory writes readings in the background)."""
    async with asyncio.timeout(timeout):
        while not condition(answer := await fetch()):
            await asyncio.sleep(0.1)
    return answer


async def test_every_new_route_needs_a_session_and_a_same_origin_csrf_write(console_gateway, client, admin, caplog) -> None:
    for path in READS:
        answer = await client.request("GET", f"/console/api/{path}")
        assert answer.status == 401 and answer.json()["error"] == "login-needed", path
    for path, body in WRITES:
        assert (await client.request("POST", f"/console/api/{path}", body)).status == 401, path
    with caplog.at_level(logging.WARNING):
        for path, body in WRITES:
            for headers in ({"Origin": "http://evil.example"}, {"X-CSRF-Token": "not-the-token"}, {"X-CSRF-Token": None}):
                answer = await admin.request("POST", f"/console/api/{path}", body, headers)
                assert answer.status == 403, (path, headers)
    assert "console 127.0.0.1:" in caplog.text and "refused" in caplog.text
    assert (await admin.request("GET", "/console/api/rules?person=mallory")).json()["rules"] == []  # nothing written
    assert "mallory-box" not in await console_gateway.gateway.db.run(load_people)


async def test_a_device_mapped_from_the_console_speaks_with_that_persons_memory(console_gateway, admin, fake_speak, caplog) -> None:
    from gateway.cli.virtual_box import simulate

    gateway = console_gateway.gateway
    with caplog.at_level(logging.INFO):
        answer = await admin.request("POST", "/console/api/devices/person", {"device_id": "box-ben", "person": "ben"})
    assert answer.status == 200, answer.json()
    assert answer.json() == {"device_id": "box-ben", "person": "ben", "was": "device.box-ben", "person_source": "console"}
    assert "console 127.0.0.1:" in caplog.text and "device box-ben now belongs to ben" in caplog.text
    assert (await gateway.db.run(load_people))["box-ben"] == "ben"  # stored: the next start loads it
    assert gateway.memory.user_for("box-ben") == "ben"
    assert "ben" in (await admin.request("GET", "/console/api/people")).json()["people"]

    audio, rate = fake_speak("Thank you.")
    await simulate(console_gateway.device_url, audio, rate, device_id="box-ben", speed=2.0, timeout=30)

    async def turns():
        return (await admin.request("GET", "/console/api/conversations?person=ben&device=box-ben")).json()

    await _wait_for(turns, lambda a: any(t["said"] == "Thank you." for t in a["turns"]))
    own = (await admin.request("GET", "/console/api/conversations?person=device.box-ben")).json()
    assert own["turns"] == []  # nothing went to the device's own memory

    # back to what gateway.yaml says (it names no person for box-ben: its own memory)
    answer = await admin.request("POST", "/console/api/devices/person", {"device_id": "box-ben", "person": None})
    assert answer.json()["person"] == "device.box-ben" and answer.json()["person_source"] == "own"
    assert "box-ben" not in await gateway.db.run(load_people)


async def test_the_console_overrides_gateway_yaml_and_can_go_back_to_it(console_gateway, admin) -> None:
    gateway = console_gateway.gateway
    try:
        answer = await admin.request("POST", "/console/api/devices/person", {"device_id": "bp-anna", "person": ""})
        assert answer.json()["person"] == "device.bp-anna" and answer.json()["person_source"] == "console"
        assert gateway.memory.user_for("bp-anna") == "device.bp-anna" and "bp-anna" not in gateway.people
    finally:
        answer = await admin.request("POST", "/console/api/devices/person", {"device_id": "bp-anna", "person": None})
    assert answer.json()["person"] == "anna" and answer.json()["person_source"] == "gateway.yaml"
    assert gateway.memory.user_for("bp-anna") == "anna"


@pytest.mark.parametrize(("body", "field"), [
    ({"device_id": "box-x", "person": "no one!"}, "person"),
    ({"device_id": "box-x", "person": "x" * 65}, "person"),
    ({"device_id": "box-x", "person": 7}, "person"),
    ({"device_id": "bad id!", "person": "ben"}, "device_id"),
    ({"person": "ben"}, "device_id"),
    ({"device_id": "box-x"}, "person"),
])
async def test_a_bad_mapping_is_refused_and_changes_nothing(console_gateway, admin, body, field) -> None:
    before = await console_gateway.gateway.db.run(load_people)
    answer = await admin.request("POST", "/console/api/devices/person", body)
    assert answer.status == 400 and answer.json()["field"] == field and answer.json()["message"]
    assert await console_gateway.gateway.db.run(load_people) == before
    assert "box-x" not in console_gateway.gateway.people


@pytest.mark.parametrize(("rule", "field", "says"), [
    ({"text": "Hot.", "reading": "Body Temperature", "above": "38"}, "reading", "reading kind"),
    ({"text": "Hot.", "reading": "temperature", "above": "hot"}, "above", "threshold"),
    ({"text": "Hot.", "reading": "temperature", "above": "38/"}, "above", "threshold"),
    ({"text": "Late.", "reading": "temperature", "before": "25:00"}, "before", "HH:MM"),
    ({"text": "Both.", "reading": "temperature", "above": "38", "before": "09:00"}, "above", "exactly one"),
    ({"text": "Neither.", "reading": "temperature"}, "above", "exactly one"),
    ({"text": "", "reading": "temperature", "above": "38"}, "text", "what is said"),
    ({"text": "x" * 501, "reading": "temperature", "above": "38"}, "text", "what is said"),
    ({"text": 5, "reading": "temperature", "above": "38"}, "text", "string"),
])
async def test_a_bad_rule_gets_the_error_naming_its_field_and_changes_nothing(admin, rule, field, says) -> None:
    answer = await admin.request("POST", "/console/api/rules", {"person": "carla", **rule})
    assert answer.status == 400 and answer.json()["field"] == field and says in answer.json()["message"], answer.json()
    assert (await admin.request("GET", "/console/api/rules?person=carla")).json()["rules"] == []
    bad_person = await admin.request("POST", "/console/api/rules", {"person": "no one!", "text": "x", "reading": "t", "above": "1"})
    assert bad_person.status == 400 and bad_person.json()["field"] == "person"


async def test_a_rule_made_in_the_console_fires_on_a_reading_is_disabled_changed_and_deleted(console_gateway, admin, caplog) -> None:
    gateway, seq = console_gateway.gateway, iter(range(100, 200))
    assert (await admin.request("POST", "/console/api/devices/person", {"device_id": "thermo-carla", "person": "carla"})).status == 200

    async def reading(celsius: float) -> None:  # as the device sends it: through the gateway's reading service
        ack = await gateway.readings.handle("thermo-carla", "test", SensorReading(next(seq), "temperature", int(time.time()),
                                                                                 (("celsius", "C", celsius),)))
        assert ack.code == "", ack

    async def rules() -> list[dict]:
        return (await admin.request("GET", "/console/api/rules?person=carla")).json()["rules"]

    async def remembered(count: int) -> None:  # the reading feed has turned `count` readings into memories
        await _wait_for(lambda: gateway.memory.recent("carla", 50, all_of=["reading:temperature"]), lambda n: len(n) >= count)

    with caplog.at_level(logging.INFO):
        answer = await admin.request("POST", "/console/api/rules", {"person": "carla", "text": "Carla has a fever: call the doctor.",
                                                                     "reading": "temperature", "above": "38"})
    assert answer.status == 200, answer.json()
    rule = answer.json()["rule"]
    assert "console 127.0.0.1:" in caplog.text and f"rule #{rule['id']} of carla created (temperature above 38)" in caplog.text
    [listed] = await rules()
    assert listed["text"] == "Carla has a fever: call the doctor." and listed["enabled"] and listed["last_fired"] is None
    assert listed["above"] == "38" and listed["source"] == "console"

    await reading(38.6)
    [fired] = (await _wait_for(rules, lambda r: r[0]["last_fired"] is not None))
    assert len(fired["firings"]) == 1 and "38.6" in fired["firings"][0]["text"] and "fever" in fired["firings"][0]["text"]
    thresholds = (await admin.request("GET", "/console/api/readings?person=carla&kind=temperature&days=1")).json()["thresholds"]
    assert [t["limits"] for t in thresholds] == [[38.0]]

    # disabled: a reading over the threshold does not fire it, and the chart has no threshold line
    assert (await admin.request("POST", "/console/api/rules/enable", {"person": "carla", "id": rule["id"], "enabled": False})).status == 200
    assert f"rule #{rule['id']} of carla disabled" in caplog.text
    await reading(39.1)
    await remembered(2)
    [off] = await rules()
    assert not off["enabled"] and len(off["firings"]) == 1
    assert (await admin.request("GET", "/console/api/readings?person=carla&kind=temperature&days=1")).json()["thresholds"] == []

    # enabled and changed: the same rule (id, firings) with a new threshold
    assert (await admin.request("POST", "/console/api/rules/enable", {"person": "carla", "id": rule["id"], "enabled": True})).status == 200
    changed = await admin.request("POST", "/console/api/rules/update", {"person": "carla", "id": rule["id"], "text": "Carla's fever is high.",
                                                                         "reading": "temperature", "above": "39.5"})
    assert changed.status == 200 and changed.json()["rule"]["id"] == rule["id"]
    bad = await admin.request("POST", "/console/api/rules/update", {"person": "carla", "id": rule["id"], "text": "x",
                                                                     "reading": "temperature", "above": "very"})
    assert bad.status == 400 and bad.json()["field"] == "above"
    await reading(39.2)  # under the new threshold
    await remembered(3)
    [now] = await rules()
    assert now["text"] == "Carla's fever is high." and now["above"] == "39.5" and now["enabled"] and len(now["firings"]) == 1
    await reading(39.8)
    [again] = await _wait_for(rules, lambda r: len(r[0]["firings"]) == 2)
    assert "fever is high" in again["firings"][0]["text"] and "39.8" in again["firings"][0]["text"]

    # another person's rule id, or a deleted one, is not found
    assert (await admin.request("POST", "/console/api/rules/delete", {"person": "anna", "id": rule["id"]})).status == 404
    assert (await admin.request("POST", "/console/api/rules/delete", {"person": "carla", "id": rule["id"]})).status == 200
    assert f"rule #{rule['id']} of carla deleted" in caplog.text
    assert await rules() == []
    for path, extra in (("rules/delete", {}), ("rules/enable", {"enabled": True}),
                        ("rules/update", {"text": "x", "reading": "temperature", "above": "1"})):
        answer = await admin.request("POST", f"/console/api/{path}", {"person": "carla", "id": rule["id"], **extra})
        assert answer.status == 404 and answer.json()["field"] == "id", path
    for body in ({"person": "carla", "id": "1", "enabled": True}, {"person": "carla", "id": 1, "enabled": "yes"}):
        assert (await admin.request("POST", "/console/api/rules/enable", body)).status == 400


async def test_a_deadline_rule_is_listed_with_its_time(admin) -> None:
    answer = await admin.request("POST", "/console/api/rules", {"person": "dora", "text": "Dora, please measure your blood pressure.",
                                                                 "reading": "blood_pressure", "before": "09:30"})
    assert answer.status == 200
    [rule] = (await admin.request("GET", "/console/api/rules?person=dora")).json()["rules"]
    assert rule["before"] == "09:30" and rule["above"] == "" and rule["reading"] == "blood_pressure"
    assert (await admin.request("POST", "/console/api/rules/delete", {"person": "dora", "id": rule["id"]})).status == 200


async def test_the_reflection_runs_now_and_the_portrait_is_shown(console_gateway, admin, caplog) -> None:
    memory = console_gateway.gateway.memory
    await memory.remember("erin", "Erin prefers tea without sugar.", kind="preference", persistent=True)
    for said in ("I planted tomatoes in the garden", "The garden tomatoes need water"):
        await memory.remember_turn("erin", said, "Nice.", "box-erin")
    before = (await admin.request("GET", "/console/api/profile?person=erin")).json()
    assert before["portrait"] == "" and before["updated"] is None and before["reflections"] == []
    with caplog.at_level(logging.INFO):
        answer = await admin.request("POST", "/console/api/profile/reflect", {"person": "erin"})
    assert answer.status == 200
    assert any("garden" in i and "tomatoes" in i for i in answer.json()["insights"])
    assert "reflection of erin run now" in caplog.text and "console 127.0.0.1:" in caplog.text
    shown = (await admin.request("GET", "/console/api/profile?person=erin")).json()
    assert shown["portrait"].startswith("Portrait of erin") and "tea without sugar" in shown["portrait"]
    assert shown["updated"] is not None and any("garden" in r["content"] for r in shown["reflections"])
    for bad in ("profile", "profile?person=no+one!", "profile?person=erin&n=0"):
        assert (await admin.request("GET", f"/console/api/{bad}")).status == 400, bad
    assert (await admin.request("POST", "/console/api/profile/reflect", {})).status == 400
    assert (await admin.request("POST", "/console/api/profile/reflect", {"person": "no one!"})).status == 400


async def test_a_session_from_another_peer_cannot_read_rules_without_logging_in(console_gateway) -> None:
    stranger = Client(console_gateway.host, local="127.0.0.3")
    assert (await stranger.request("GET", "/console/api/rules?person=carla")).status == 401


async def test_a_mapping_set_in_the_console_holds_after_a_restart(console_gateway, admin, fake_runner) -> None:
    from gateway.app import Gateway

    assert (await admin.request("POST", "/console/api/devices/person", {"device_id": "lamp-gus", "person": "gus"})).status == 200
    restarted = Gateway(console_gateway.cfg, fake_runner, [])  # the same gateway.yaml and devices database
    assert "lamp-gus" not in restarted.people  # gateway.yaml does not name it: loaded when it serves
    ready = asyncio.Event()
    task = asyncio.create_task(restarted.serve(ready))
    try:
        await asyncio.wait_for(ready.wait(), 30)
        assert restarted.people["lamp-gus"] == "gus" and restarted.people["bp-anna"] == "anna"
        assert restarted.people.source("lamp-gus") == "console"
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        restarted.db.close()
