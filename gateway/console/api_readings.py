"""Console API for sensor readings, per person and kind, over the stored readings (a ReadingList:
the devices database, or PostgreSQL shared by several gateways) and the alert thresholds of the
memory's rules (`MemoryService.active_rules`).

    GET readings?person=P&kind=K&days=D   {"readings": [...] oldest first, "kinds", "people", "thresholds"}
    GET readings.csv?person=P&kind=K&days=D   the same rows as CSV

A text cell of the CSV that a spreadsheet would take for a formula (it begins with = + - @, a tab
or a carriage return: a device's unit, id or kind) starts with a single quote, as OWASP advises
against CSV injection; the values stay numbers.

A reading belongs to the person its device is mapped to (memory.users, else the device's own).
"""

from __future__ import annotations

import csv
import io
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from gateway.console.routes import ApiError, ApiRequest, FileAnswer, Routes
from gateway.devices.reading_list import ReadingList
from gateway.devices.readings import StoredRow

DAY_S = 86400.0
MAX_ROWS = 20000
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
        rows = [r for r in found if not person or self._person_of(r.device_id) == person]
        rows.sort(key=lambda r: r.measured_at)
        return rows, person, kind

    async def list(self, request: ApiRequest) -> dict[str, Any]:
        rows, person, kind = await self._rows(request)
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
        return {"person": person, "kind": kind, "people": people, "kinds": kinds, "thresholds": thresholds,
                "readings": [{"id": r.reading_id, "device_id": r.device_id, "kind": r.kind, "values": {n: _shown(v) for n, v in r.values.items()},
                              "units": r.units, "measured_at": r.measured_at.timestamp(), "clock": r.clock}
                             for r in rows]}

    async def csv(self, request: ApiRequest) -> FileAnswer:
        rows, person, kind = await self._rows(request)
        out = io.StringIO()
        writer = csv.writer(out)
        writer.writerow(["id", "measured_at_utc", "device_id", "person", "kind", "name", "value", "unit"])
        for r in rows:
            for name, value in r.values.items():
                writer.writerow([r.reading_id, r.measured_at.isoformat(timespec="seconds"), _cell(r.device_id),
                                 _cell(self._person_of(r.device_id)), _cell(r.kind), _cell(name), _shown(value),
                                 _cell(r.units.get(name, ""))])
        name = "-".join(x for x in ("readings", person, kind) if x) + ".csv"
        return FileAnswer("text/csv; charset=utf-8", out.getvalue().encode(), name)
