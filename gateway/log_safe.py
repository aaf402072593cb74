"""Untrusted text made safe for one log line.

A request path, a query value or a device's Error text may hold a line feed (forging a log line
that seems to come from elsewhere), terminal escapes, bidi overrides, or 60 KB of anything.
`log_safe` keeps printable text as it is (also non-ASCII: a Chinese device name stays readable),
escapes every other character as `repr` does (`\\n`, `\\x1b`, `\\u202e`; a backslash doubled, so
an escape seen in the log was one), and keeps at most `limit` characters, saying how many more
there were.
"""

from __future__ import annotations

MAX_CHARS = 200


def _escaped(char: str) -> str:
    if char == "\\":
        return "\\\\"
    return char if char.isprintable() else repr(char)[1:-1]


def log_safe(text: str, limit: int = MAX_CHARS) -> str:
    """`text` for a log line: one line, printable, at most `limit` characters of it."""
    kept = text[:limit]
    if not (kept.isprintable() and "\\" not in kept):
        kept = "".join(_escaped(c) for c in kept)
    if len(text) > limit:
        kept += f"... ({len(text) - limit} more characters)"
    return kept
