"""Turn the golden vectors (vectors/v1.json, v1_invalid.json) into a line format for C tests.

    python firmware_protocol/c/vectors_to_lines.py > build/vectors.txt
    python firmware_protocol/c/vectors_to_lines.py --corpus build/corpus   # fuzz seeds

Valid vector:   `valid NAME TYPE xHEX xSTREAM_HEX` then one line per field in wire order.
Invalid vector: `invalid NAME xHEX|none xSTREAM_HEX|none MAX_FRAME_BYTES ERROR_CODE`.
Hex strings carry an `x` prefix so that empty ones stay one token. Field lines hold the raw
wire values (enum numbers, bool 0/1, UTF-8 as hex, f32 as its 32 bits in hex), taken from the
message the JSON describes (parsed by the Python `from_dict`).
"""

from __future__ import annotations

import json
import struct
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gen_tables import c_kind  # noqa: E402

from firmware_protocol.codec import from_dict  # noqa: E402
from firmware_protocol.framing import DEFAULT_MAX_FRAME_BYTES  # noqa: E402
from firmware_protocol.message import wire_fields  # noqa: E402
from firmware_protocol.vectors import INVALID_FILE, VALID_FILE  # noqa: E402


def _x(text: str) -> str:
    return "x" + text.encode("utf-8").hex()


def field_line(kind: str, value: Any) -> str:
    if kind in ("FP_K_STR", "FP_K_DEVICE_ID", "FP_K_IDENT"):
        return _x(value)
    if kind == "FP_K_BYTES_REST":
        return "x" + value.hex()
    if kind == "FP_K_AUDIO_FORMAT":
        return f"{value.codec_code} {value.sample_rate} {value.channels}"
    if kind == "FP_K_VALUES":
        parts = [str(len(value))]
        for name, unit, number in value:
            parts += [_x(name), _x(unit), struct.pack(">f", number).hex()]
        return " ".join(parts)
    if kind == "FP_K_RECORDS":
        return " ".join([str(len(value))] + [str(int(v)) for record in value for v in record])
    return str(int(value))


def lines() -> list[str]:
    out = []
    for vec in json.loads(VALID_FILE.read_text("utf-8")):
        msg = from_dict(vec["message"])
        out.append(f"valid {vec['name']} {msg.NAME} x{vec['hex']} x{vec['stream_hex']}")
        for name, spec in wire_fields(type(msg)):
            out.append(field_line(c_kind(type(msg), name, spec)[0], getattr(msg, name)))
    for vec in json.loads(INVALID_FILE.read_text("utf-8")):
        hex_ = "x" + vec["hex"] if "hex" in vec else "none"
        stream = "x" + vec["stream_hex"] if "stream_hex" in vec else "none"
        limit = vec.get("max_frame_bytes", DEFAULT_MAX_FRAME_BYTES)
        out.append(f"invalid {vec['name']} {hex_} {stream} {limit} {vec['error']}")
    return out


def write_corpus(folder: Path) -> None:
    """One file per valid vector's message and stream bytes: the fuzzer's seed corpus."""
    folder.mkdir(parents=True, exist_ok=True)
    for vec in json.loads(VALID_FILE.read_text("utf-8")):
        (folder / f"{vec['name']}.msg").write_bytes(bytes.fromhex(vec["hex"]))
        (folder / f"{vec['name']}.stream").write_bytes(bytes.fromhex(vec["stream_hex"]))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--corpus"]:
        write_corpus(Path(sys.argv[2]))
    else:
        sys.stdout.write("\n".join(lines()) + "\n")
