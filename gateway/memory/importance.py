"""Local importance heuristic (0-10), used when no LLM is configured to score importance.

Start at 3 (small talk). Rules and preferences +4, facts about the user (name, family, health)
+3, sensor readings and events +2, errors/decisions +2, alarming words (pain, fall, dizzy,
emergency, ...) +3, out-of-range blood pressure in the text (systolic >= 140 or diastolic >= 90)
+2, very short utterances (<= 3 words) -1. Clamped to 0-10.
"""

from __future__ import annotations

import re

_ALARM = re.compile(r"\b(pain|hurts?|fell|fall|dizzy|emergency|help me|ambulance|chest|bleeding|faint)\b", re.I)
_PERSONAL = re.compile(r"\b(my name|i am|i'm|my (wife|husband|son|daughter|doctor)|allergic|medicine|birthday)\b", re.I)
_BP = re.compile(r"\b(\d{2,3})\s*(?:/|over)\s*(\d{2,3})\b")
_BONUS = {"rule": 4, "preference": 4, "fact": 3, "reading": 2, "event": 2, "error": 2, "decision": 2, "insight": 3}


def heuristic_importance(content: str, kind: str | None = None) -> int:
    score = 3 + _BONUS.get(kind or "", 0)
    if _ALARM.search(content):
        score += 3
    if _PERSONAL.search(content):
        score += 2
    m = _BP.search(content)
    if m and (int(m.group(1)) >= 140 or int(m.group(2)) >= 90):
        score += 2
    if len(content.split()) <= 3:
        score -= 1
    return max(0, min(10, score))
