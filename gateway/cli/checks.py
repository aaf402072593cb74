"""One finding of `gateway doctor`: a status (OK, WARN or FAIL), what was found and what to do."""

from __future__ import annotations

from dataclasses import dataclass

OK, WARN, FAIL = "OK", "WARN", "FAIL"


@dataclass(frozen=True)
class Check:
    status: str
    what: str
    fix: str = ""
