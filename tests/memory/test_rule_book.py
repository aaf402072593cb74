"""The RuleBook (the console's rule editing) on a real memory: rules checked like gateway.yaml's,
changed in place keeping their firings, disabled rules skipped by the rule engine and not written
again from gateway.yaml; and DevicePeople, the live device -> person mapping over memory.users."""

from __future__ import annotations

import pytest

from gateway.config import parse_config
from gateway.memory.device_users import DevicePeople
from gateway.memory.events import Alert
from gateway.memory.rule_book import NoSuchRule, RuleBook, RuleDraft, RuleInputError
from gateway.memory.rules import install_rules
from gateway.memory.service import MemoryService

from tests.memory.test_rules_reflection import DAY1, bp, engine

TEXT = "Your blood pressure is high. Please rest."


async def test_a_rule_changed_in_place_keeps_its_id_and_firings_and_fires_at_its_new_threshold(memory: MemoryService, clock) -> None:
    clock.now = DAY1.timestamp()
    book, alerts = RuleBook(memory), []
    rule = await book.create("anna", RuleDraft(TEXT, "blood_pressure", above="140/90"))
    assert set(rule.tags) >= {"kind:rule", "persistent:true", "reading:blood_pressure", "above:140/90", "source:console"}
    assert len(await engine(memory, alerts).on_reading(await bp(memory, DAY1, 150, 80))) == 1
    changed = await book.update("anna", rule.id, RuleDraft("Very high blood pressure.", "blood_pressure", above="160/100"))
    assert changed.id == rule.id and changed.ts == rule.ts and "above:160/100" in changed.tags and "above:140/90" not in changed.tags
    [found] = await memory.search("anna", "Very high blood pressure.", 1, all_of=["kind:rule"])
    assert found.node.id == rule.id and found.relevance > 0.99  # re-embedded: its vector is the new text's
    assert await engine(memory, alerts).on_reading(await bp(memory, DAY1, 150, 80, seq=2)) == []
    [listed] = await book.list("anna")
    assert listed["above"] == "160/100" and len(listed["firings"]) == 1 and listed["last_fired"] is not None


async def test_a_disabled_rule_does_not_fire_and_a_disabled_config_rule_is_not_written_again(memory: MemoryService, clock) -> None:
    clock.now = DAY1.timestamp()
    cfg = parse_config({"memory": {"rules": [{"user": "anna", "text": TEXT, "reading": "blood_pressure", "above": "140/90"}]}})
    [rule] = await install_rules(memory, cfg.memory.rules)
    book, alerts = RuleBook(memory), []
    off = await book.set_enabled("anna", rule.id, False)
    assert "state:disabled" in off.tags and "source:config" in off.tags
    assert await memory.active_rules("anna") == [] and [r.id for r in await memory.rules("anna")] == [rule.id]
    assert await engine(memory, alerts).on_reading(await bp(memory, DAY1, 170, 100)) == []
    assert await install_rules(memory, cfg.memory.rules) == []  # the next start keeps it disabled
    on = await book.set_enabled("anna", rule.id, True)
    assert "state:disabled" not in on.tags and [r.id for r in await memory.active_rules("anna")] == [rule.id]
    fired: list[Alert] = await engine(memory, alerts).on_reading(await bp(memory, DAY1, 170, 100, seq=2))
    assert [a.rule_id for a in fired] == [rule.id]


@pytest.mark.parametrize(("draft", "field"), [
    (RuleDraft(TEXT, "Blood pressure", above="140/90"), "reading"),
    (RuleDraft(TEXT, "blood_pressure", above="high"), "above"),
    (RuleDraft(TEXT, "blood_pressure", before="9:00 am"), "before"),
    (RuleDraft(TEXT, "blood_pressure"), "above"),
    (RuleDraft("", "blood_pressure", above="140"), "text"),
])
async def test_a_bad_rule_names_its_field_and_writes_nothing(memory: MemoryService, draft, field) -> None:
    with pytest.raises(RuleInputError) as caught:
        await RuleBook(memory).create("anna", draft)
    assert caught.value.field == field
    assert await memory.rules("anna") == []


async def test_another_persons_rule_is_not_found(memory: MemoryService) -> None:
    rule = await RuleBook(memory).create("anna", RuleDraft(TEXT, "blood_pressure", above="140/90"))
    for call in (RuleBook(memory).delete("ben", rule.id), RuleBook(memory).set_enabled("ben", rule.id, False)):
        with pytest.raises(NoSuchRule):
            await call
    assert [r.id for r in await memory.active_rules("anna")] == [rule.id]


def test_device_people_is_the_yaml_mapping_with_the_consoles_changes_over_it() -> None:
    people = DevicePeople({"box-anna": "anna", "bp-anna": "anna"})
    people.load({"bp-anna": "", "box-ben": "ben"})
    assert dict(people) == {"box-anna": "anna", "box-ben": "ben"} and "bp-anna" not in people
    assert [people.source(d) for d in ("box-anna", "bp-anna", "box-ben", "other")] == ["gateway.yaml", "console", "console", "own"]
    people.reset("bp-anna")
    people.set("box-anna", "carla")
    assert people.get("bp-anna") == "anna" and people["box-anna"] == "carla" and len(people) == 3
