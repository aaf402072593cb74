"""Daily reflection and user portrait, with a local summariser (no LLM needed, works offline).

Reflection over the last 24 hours of a user's memory makes insight nodes (type reflection,
tags inherited from their sources minus session:/date:/schedule:, plus kind:insight and
source:reflection, pointer_ids = the sources):
- one per sensor-reading kind: count, average and range ("blood pressure: 3 readings in the last
  day, average 148/92, highest 158/95; 2 above 140/90");
- one for the conversation: the most frequent topics (content words of what the user said).
The portrait (profiles.portrait) is rebuilt from the persistent facts and preferences, the
latest insights and the activity of the last week.
"""

from __future__ import annotations

import re
from collections import Counter
from datetime import datetime

from gateway.memory.rules import _reading_values, _tag, is_reading
from gateway.memory.service import MemoryService
from gateway.memory.nodes import Node
from gateway.memory.tags import inherit_tags

DAY = 24 * 3600
_STOP = frozenset("""a an the and or but if so to of in on at for with about from by is are was were be been am
i you he she it we they me my your his her its our their this that these those what which who whom how when
where why do does did done have has had not no yes can could will would should shall may might must just
very really too also than then there here please thank thanks okay ok hello hi bye goodbye tell say said
know think like want time today tomorrow yesterday now some any all more most much many one two three
user assistant""".split())
_WORD = re.compile(r"[a-zA-Z][a-zA-Z'-]{2,}")


def _fmt(values: list[float]) -> str:
    return "/".join(str(round(v)) if abs(v) >= 10 else f"{v:.1f}" for v in values)


def _reading_insight(kind: str, nodes: list[Node]) -> str:
    series = [v for v in (_reading_values(n.content) for n in nodes) if v]
    name = kind.replace("_", " ")
    if not series:
        return f"{name}: {len(nodes)} readings in the last day."
    width = min(len(v) for v in series)
    series = [v[:width] for v in series]
    avg = [sum(v[i] for v in series) / len(series) for i in range(width)]
    high = max(series, key=lambda v: v[0])
    text = f"{name}: {len(series)} readings in the last day, average {_fmt(avg)}, highest {_fmt(high)}"
    if kind == "blood_pressure" and width == 2:
        above = sum(1 for s, d in series if s >= 140 or d >= 90)
        text += f"; {above} above 140/90" if above else "; none above 140/90"
    return text + "."


def _topics(nodes: list[Node], top: int = 5) -> list[str]:
    words: Counter[str] = Counter()
    for n in nodes:
        said = n.content.split("\n")[0].removeprefix("User:")
        words.update(w.lower() for w in _WORD.findall(said) if w.lower() not in _STOP)
    return [w for w, c in words.most_common(top) if c >= 2]


async def reflect(memory: MemoryService, user: str, now: datetime) -> list[Node]:
    """Write today's insight nodes for `user`; returns them (none when there was nothing new)."""
    since = now.timestamp() - DAY
    recent = await memory.recent(user, 1000, since=since, types=["observation", "conversation"])
    insights: list[tuple[str, list[Node]]] = []
    by_kind: dict[str, list[Node]] = {}
    for n in recent:
        if is_reading(n):
            by_kind.setdefault(_tag(n, "reading"), []).append(n)
    for kind, nodes in sorted(by_kind.items()):
        insights.append((_reading_insight(kind, nodes), nodes))
    talks = [n for n in recent if n.type == "conversation"]
    if topics := _topics(talks):
        insights.append((f"Talked about most in the last day: {', '.join(topics)} ({len(talks)} turns).", talks))
    written = []
    for text, sources in insights:
        written.append(await memory.remember(
            user, text, node_type="reflection", importance=6, when=now,
            extra_tags=inherit_tags(n.tags for n in sources), pointer_ids=[n.id for n in sources][:200]))
    return written


async def portrait(memory: MemoryService, user: str, now: datetime) -> str:
    """Rebuild and store the user's portrait; returns it."""
    facts = await memory.recent(user, 50, all_of=["persistent:true"])
    insights = await memory.reflections(user, 5)
    week = await memory.recent(user, 1000, since=now.timestamp() - 7 * DAY)
    lines = [f"Portrait of {user}, {now:%Y-%m-%d}."]
    if facts:
        lines.append("Known facts, preferences and rules: " + " ".join(f.content.rstrip(".") + "." for f in facts))
    if insights:
        lines.append("Recent insights: " + " ".join(i.content for i in insights))
    talks = sum(1 for n in week if n.type == "conversation")
    readings = sum(1 for n in week if is_reading(n))
    lines.append(f"Last 7 days: {talks} conversation turns, {readings} sensor readings.")
    text = "\n".join(lines)[:4000]
    await memory.set_profile(user, portrait=text)
    return text
