"""Tags in the seed's namespaces (`kind:`, `source:`, `persistent:true`, `domain:`, `session:`,
`date:`, `schedule:` and free `name:value` pairs), normalised on write.

Normalised form: lower-case namespace, no spaces around the colon, inner spaces -> `_`, the value
keeps its case except for `kind`, `source`, `domain` and `persistent` (lower-cased), duplicates
removed, sorted. A tag without a namespace is refused: it would not be filterable reliably.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from gateway.memory.errors import MemoryInputError

NODE_TYPES = ("observation", "conversation", "reflection")
KINDS = ("event", "fact", "rule", "preference", "decision", "error", "insight", "reading", "note")
NAMESPACES = {
    "kind": "what the node is: " + " | ".join(KINDS),
    "source": "who wrote it (device id, agent name, user, reflection, conversation)",
    "persistent": "`persistent:true` = long-term, never decays out (rules and preferences carry it)",
    "domain": "the field of life: homecare, life_assistant, engineering, education, ...",
    "session": "a working session id (not inherited by reflections)",
    "date": "YYYY-MM-DD the node is about (not inherited by reflections)",
    "schedule": "when a rule applies: daily, hourly, before:09:00, ... (not inherited)",
    "reading": "the sensor reading kind of an observation (blood_pressure, temperature, ...)",
    "profile": "a profile fact slot (profile:name)",
    "state": "`state:disabled` = a rule that is kept but does not fire (the console disables and enables rules)",
    "alert": "alert:<rule id> = an alert that rule raised (written by the rule engine when it fires)",
}
DISABLED = "state:disabled"
_LOWER_VALUE = {"kind", "source", "domain", "persistent"}
_NOT_INHERITED = ("session:", "date:", "schedule:")
_TAG = re.compile(r"^([a-z][a-z0-9_]{0,31}):(.{1,120})$")


def normalize_tag(tag: str) -> str:
    raw = tag.strip()
    ns, sep, value = raw.partition(":")
    ns, value = ns.strip().lower(), re.sub(r"\s+", "_", value.strip())
    if ns in _LOWER_VALUE:
        value = value.lower()
    out = f"{ns}:{value}"
    if not sep or not _TAG.match(out):
        raise MemoryInputError(f"bad tag {tag!r}: use namespace:value, e.g. domain:homecare (namespaces: "
                               f"{', '.join(NAMESPACES)})")
    if ns == "kind" and value not in KINDS:
        raise MemoryInputError(f"bad tag {tag!r}: kind must be one of {', '.join(KINDS)}")
    return out


def normalize_tags(tags: Iterable[str]) -> list[str]:
    return sorted({normalize_tag(t) for t in tags})


def build_tags(kind: str | None, source: str | None, persistent: bool, extra: Iterable[str] = ()) -> list[str]:
    tags = list(extra)
    if kind:
        tags.append(f"kind:{kind}")
    if source:
        tags.append(f"source:{source}")
    if persistent:
        tags.append("persistent:true")
    out = normalize_tags(tags)
    if len([t for t in out if t.startswith("kind:")]) > 1:
        raise MemoryInputError(f"a node has one kind, got {[t for t in out if t.startswith('kind:')]}")
    return out


def inherit_tags(source_tags: Iterable[Iterable[str]]) -> list[str]:
    """Reflection tags: the sources' tags minus session:/date:/schedule:/kind:/source:, plus
    kind:insight and source:reflection."""
    keep = {t for tags in source_tags for t in tags
            if not t.startswith(_NOT_INHERITED) and not t.startswith(("kind:", "source:", "persistent:"))}
    return sorted(keep | {"kind:insight", "source:reflection"})


def schema() -> dict:
    """What `memory_get_schema` returns: node types, kinds and tag namespaces."""
    return {"node_types": list(NODE_TYPES), "kinds": list(KINDS), "tag_namespaces": dict(NAMESPACES),
            "tag_format": "namespace:value, normalised on write (lower-case namespace, spaces -> _)"}
