"""Golden vectors of protocol v1, shared with the C implementation.

`v1.json`: valid messages with their message bytes (`hex`) and stream frame (`stream_hex`).
`v1_invalid.json`: bytes that must fail with the given error code, either as a message
(`hex`, fed to `decode`) or as a byte stream (`stream_hex`, fed to a fresh StreamDeframer,
which must report exactly that one error; `max_frame_bytes` is given when not the default).

Regenerate with `python -m firmware_protocol.vectors --write`, verify with `--check`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

VECTORS_DIR = Path(__file__).resolve().parent
VALID_FILE = VECTORS_DIR / "v1.json"
INVALID_FILE = VECTORS_DIR / "v1_invalid.json"


def load_valid() -> list[dict[str, Any]]:
    """The valid vectors as stored in v1.json."""
    return json.loads(VALID_FILE.read_text(encoding="utf-8"))


def load_invalid() -> list[dict[str, Any]]:
    """The invalid vectors as stored in v1_invalid.json."""
    return json.loads(INVALID_FILE.read_text(encoding="utf-8"))
