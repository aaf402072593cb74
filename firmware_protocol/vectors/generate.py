"""Build the golden vector files from `cases.py` (deterministic) and self-check them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..codec import decode, encode, to_dict
from ..errors import ProtocolError
from ..framing import DEFAULT_MAX_FRAME_BYTES, StreamDeframer, encode_stream_frame
from . import INVALID_FILE, VALID_FILE
from .cases import INVALID, INVALID_STREAM, VALID


def build_valid() -> list[dict[str, Any]]:
    out = []
    for name, note, msg in VALID:
        out.append(
            {
                "name": name,
                "note": note,
                "message": to_dict(msg),
                "hex": encode(msg).hex(),
                "stream_hex": encode_stream_frame(msg).hex(),
            }
        )
    return out


def build_invalid() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for name, note, hex_, error in INVALID:
        _expect_error(name, error, lambda h=hex_: [decode(bytes.fromhex(h))])
        out.append({"name": name, "note": note, "hex": hex_, "error": error})
    for name, note, stream_hex, error, max_frame in INVALID_STREAM:
        limit = max_frame or DEFAULT_MAX_FRAME_BYTES
        _expect_error(name, error, lambda h=stream_hex, m=limit: _feed(h, m))
        entry: dict[str, Any] = {"name": name, "note": note, "stream_hex": stream_hex}
        if max_frame is not None:
            entry["max_frame_bytes"] = max_frame
        entry["error"] = error
        out.append(entry)
    return out


def _feed(stream_hex: str, max_frame_bytes: int) -> list[Any]:
    results = StreamDeframer(max_frame_bytes).feed(bytes.fromhex(stream_hex))
    for item in results:
        if isinstance(item, ProtocolError):
            raise item
    return results


def _expect_error(name: str, code: str, run: Any) -> None:
    try:
        result = run()
    except ProtocolError as exc:
        if exc.code != code:
            raise AssertionError(f"{name}: expected {code}, got {exc.code} ({exc.text})") from exc
        return
    raise AssertionError(f"{name}: expected {code}, but it decoded to {result!r}")


def render(vectors: list[dict[str, Any]]) -> str:
    return json.dumps(vectors, indent=2, ensure_ascii=False) + "\n"


def expected_files() -> dict[Path, str]:
    """Each vector file and the exact text it must contain."""
    return {VALID_FILE: render(build_valid()), INVALID_FILE: render(build_invalid())}
