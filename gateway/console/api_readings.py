"""Console API for sensor readings, per person and kind, over the stored readings (a ReadingList:
the devices database, or PostgreSQL shared by several gateways) and the alert thresholds of the
memory's rules (`MemoryService.active_rules`).

    GET readings?person=P&kind=K&days=D   {"readings": [...] oldest first, "kinds", "people", "thresholds"}
    GET readings.csv?person=P&kind=K&days=D   the same rows as CSV

A text cell of the CSV that a spreadsheet would take for a formula (it begins with = + - @, a tab
or a carriage return: a device's unit, id or kind) starts with a single quote, as OWASP advises
against CSV injection; the values stay numbers.

A reading belongs to the person its device is mapped to (memory.users, else the device's own).
Up to MAX_ROWS readings are filtered, shaped and encoded on a worker thread, the JSON a slice of
ENCODE_ROWS at a time: the C encoder holds the GIL for a whole call, and a year of readings (~5 MB)
in one call would stall the event loop, and every device's audio with it, for a quarter second on a Pi.
"""

from __future__ import annotations

import asyncio
import csv
import io
import json
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from gateway.console.routes import ApiError, ApiRequest, FileAnswer, JsonAnswer, Routes
from gateway.devices.reading_list import ReadingList
from gateway.devices.readings import StoredRow

DAY_S = 86400.0
MAX_ROWS = 20000
ENCODE_ROWS = 500  # readings per json.dumps call (each call holds the GIL throughout)
PERIODS = {"1": 1, "7": 7, "30": 30, "365": 365}  # day, week, month, year
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")  # a cell starting so is a formula to a spreadsheet

RulesOf = Callable[[str], Awaitable[list[Any]]]  # person -> the memory's active rules (Nodes), [] without memory


def _shown(value: float) -> float:
    """A value as the device meant it: readings travel as float32, so 37.1 arrives as
    37.099998474121094; float32 holds about 7 significant digits, and so does what is shown."""
    return float(f"{value:.7g}")


def _cell(text: str) -> str:
    """A text cell a spreadsheet shows as text: "=HYPERLINK(...)" -> "'=HYPERLINK(...)"."""
    return "'" + text if text.startswith(FORMULA_START) else text


def _row(r: StoredRow) -> dict[str, Any]:
    return {"id": r.reading_id, "device_id": r.device_id, "kind": r.kind, "values": {n: _shown(v) for n, v in r.values.items()},
            "units": r.units, "measured_at": r.measured_at.timestamp(), "clock": r.clock}


def _encode(head: dict[str, Any], rows: list[StoredRow]) -> bytes:
    """`head` with `"readings": [rows...]` as JSON, encoded a slice of ENCODE_ROWS at a time."""
    slices = (json.dumps([_row(r) for r in rows[i:i + ENCODE_ROWS]], ensure_ascii=False)[1:-1]
              for i in range(0, len(rows), ENCODE_ROWS))
    return (json.dumps(head, ensure_ascii=False)[:-1] + ', "readings": [' + ", ".join(slices) + "]}").encode()


def _tag(tags: tuple[str, ...], ns: str) -> str | None:
    return next((t.split(":", 1)[1] for t in tags if t.startswith(ns + ":")), None)


class ReadingsApi:
    def __init__(self, readings: ReadingList, person_of: Callable[[str], str], rules_of: RulesOf,
                 mapped: Mapping[str, str], clock: Callable[[], float] = time.time) -> None:
        self._readings = readings
        self._person_of = person_of
        self._rules_of = rules_of
        self._mapped = mapped
        self._clock = clock

    def routes(self) -> Routes:
        return {("GET", "readings"): self.list, ("GET", "readings.csv"): self.csv}

    async def _rows(self, request: ApiRequest) -> tuple[list[StoredRow], str, str]:
        days = request.query.get("days", "7")
        if days not in PERIODS:
            raise ApiError(400, f"days: one of {', '.join(PERIODS)}", "days")
        person = request.query.get("person", "")
        kind = request.query.get("kind", "")
        since = self._clock() - PERIODS[days] * DAY_S
        found = await self._readings.recent(kind or None, MAX_ROWS, since)
        return found, person, kind

    def _of(self, found: list[StoredRow], person: str) -> list[StoredRow]:
        """The person's readings, oldest first (on the worker thread)."""
        rows = [r for r in found if not person or self._person_of(r.device_id) == person]
        rows.sort(key=lambda r: r.measured_at)
        return rows

    async def list(self, request: ApiRequest) -> JsonAnswer:
        found, person, kind = await self._rows(request)
        stored = await self._readings.kinds()
        people = sorted({self._person_of(d) for d, _ in stored} | set(self._mapped.values()))
        kinds = sorted({k for d, k in stored if not person or self._person_of(d) == person})
        thresholds = []
        for rule in (await self._rules_of(person)) if person else []:
            above, of = _tag(rule.tags, "above"), _tag(rule.tags, "reading")
            if above and of and (not kind or of == kind):
                try:
                    limits = [float(x) for x in above.split("/")]
                except ValueError:
                    continue
                thresholds.append({"kind": of, "limits": limits, "text": rule.content})
        head = {"person": person, "kind": kind, "people": people, "kinds": kinds, "thresholds": thresholds}
        return JsonAnswer(await asyncio.to_thread(lambda: _encode(head, self._of(found, person))))

    async def csv(self, request: ApiRequest) -> FileAnswer:
        found, person, kind = await self._rows(request)
        name = "-".join(x for x in ("readings", person, kind) if x) + ".csv"
        return FileAnswer("text/csv; charset=utf-8", await asyncio.to_thread(lambda: self._csv(self._of(found, person))), name)

    def _csv(self, rows: list[StoredRow]) -> bytes:
        """The CSV export's bytes (on the worker thread)."""
        out = io.StringIO()
        writer = csv.writer(out)
        writer.writerow(["id", "measured_at_utc", "device_id", "person", "kind", "name", "value", "unit"])
        for r in rows:
            for name, value in r.values.items():
                writer.writerow([r.reading_id, r.measured_at.isoformat(timespec="seconds"), _cell(r.device_id),
                                 _cell(self._person_of(r.device_id)), _cell(r.kind), _cell(name), _shown(value),
                                 _cell(r.units.get(name, ""))])
        return out.getvalue().encode()
