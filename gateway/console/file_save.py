"""How the console saves a file it edits (the reply table, the action rules): whole or not at all.

The text goes to a temporary file beside it (`.<name>.console-tmp`), which then replaces it in
one rename: the gateway, re-reading the file, never sees half of it.
"""

from __future__ import annotations

import os
from pathlib import Path


def save_text(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.console-tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
