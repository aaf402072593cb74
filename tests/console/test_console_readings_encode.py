"""The readings API shapes and encodes its answer on a worker thread, a slice at a time: the JSON
is the same whatever the slices (1,703 readings, 1,135 of one person: three slices, the last partial; none at all), the
person filter holds, and neither the filter nor the encoding runs on the event loop's thread."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime

import pytest

from gateway.console.api_readings import ENCODE_ROWS, ReadingsApi
from gateway.console.routes import ApiRequest, JsonAnswer
from gateway.devices.readings import StoredRow

pytestmark = pytest.mark.asyncio
NOW = 1_764_800_000.0
COUNT = 3 * ENCODE_ROWS + 203


def _row(i: int) -> StoredRow:
    at = datetime.fromtimestamp(NOW - 3600 - i, UTC)
    device = "cuff-ann" if i % 3 else "cuff-bob"
    return StoredRow(i + 1, device, i, "blood_pressure", {"systolic": 120.0 + i % 7, "diastolic": 80.0},
                     {"systolic": "mmHg", "diastolic": "mmHg"}, at, at, "device")


class Stored:
    def __init__(self, rows: list[StoredRow]) -> None:
        self.rows = rows

    async def recent(self, kind, limit, since, device_id=None):
        return [r for r in self.rows if r.measured_at.timestamp() >= since][:limit]

    async def kinds(self):
        return sorted({(r.device_id, r.kind) for r in self.rows})


async def _list(rows: list[StoredRow], person: str, threads: set[int]) -> dict:
    def person_of(device_id: str) -> str:
        threads.add(threading.get_ident())
        return {"cuff-ann": "ann", "cuff-bob": "bob"}[device_id]

    async def no_rules(person: str) -> list:
        return []

    api = ReadingsApi(Stored(rows), person_of, no_rules, {}, clock=lambda: NOW)
    answer = await api.list(ApiRequest("GET", "readings", {"person": person, "days": "1"}, None, "test"))
    assert isinstance(answer, JsonAnswer)
    return json.loads(answer.body)


async def test_many_readings_are_encoded_in_slices_off_the_loop_into_the_same_json():
    rows = [_row(i) for i in range(COUNT)]
    threads: set[int] = set()
    threads_on_loop = threading.get_ident()
    ann = await _list(rows, "ann", threads)
    expected = sorted((r for r in rows if r.device_id == "cuff-ann"), key=lambda r: r.measured_at)
    assert len(expected) > 2 * ENCODE_ROWS  # more than two slices
    assert ann["readings"] == [{"id": r.reading_id, "device_id": r.device_id, "kind": r.kind, "values": r.values,
                                "units": r.units, "measured_at": r.measured_at.timestamp(), "clock": "device"}
                               for r in expected]
    assert ann["person"] == "ann" and ann["people"] == ["ann", "bob"] and ann["kinds"] == ["blood_pressure"]
    assert ann["thresholds"] == []
    every = await _list(rows, "", set())
    assert len(every["readings"]) == COUNT
    assert [r["measured_at"] for r in every["readings"]] == sorted(r.measured_at.timestamp() for r in rows)
    # the filter ran on a worker thread; on the loop only the list of people and kinds (2 devices)
    assert threads - {threads_on_loop}


async def test_no_readings_is_an_empty_list():
    answer = await _list([], "ann", set())
    assert answer["readings"] == [] and answer["kinds"] == []
