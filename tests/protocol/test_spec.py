"""PROTOCOL.md agrees with the code and the golden vectors, so the spec cannot drift."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import firmware_protocol
from firmware_protocol import MESSAGE_TYPES, ErrorCode
from firmware_protocol.message import wire_fields
from firmware_protocol.messages import RESERVED_TYPE_RANGES
from firmware_protocol.vectors import load_valid

SPEC = (Path(firmware_protocol.__file__).parent / "PROTOCOL.md").read_text(encoding="utf-8")
VECTORS = {v["name"]: v for v in load_valid()}
HEX_BYTE = re.compile(r"[0-9a-f]{2}")


def example_blocks() -> list[tuple[str, str, str]]:
    """(kind, vector name, hex) for every ```text block starting with `vector` or `stream`."""
    blocks = []
    for body in re.findall(r"```text\n(.*?)```", SPEC, flags=re.S):
        lines = body.splitlines()
        head = lines[0].split()
        if len(head) != 2 or head[0] not in ("vector", "stream"):
            continue
        data = []
        for line in lines[1:]:
            for token in line.split():
                if not HEX_BYTE.fullmatch(token):
                    break  # the rest of the line is a comment
                data.append(token)
        blocks.append((head[0], head[1], "".join(data)))
    return blocks


def message_section(cls) -> str:
    match = re.search(
        rf"^### 0x{cls.TYPE:02X} {cls.__name__}\n(.*?)(?=^##)", SPEC, flags=re.S | re.M
    )
    assert match, f"PROTOCOL.md has no section '### 0x{cls.TYPE:02X} {cls.__name__}'"
    return match.group(1)


def test_every_example_in_the_spec_is_a_golden_vector_byte_for_byte():
    blocks = example_blocks()
    assert len(blocks) >= len(MESSAGE_TYPES)
    for kind, name, data in blocks:
        key = "hex" if kind == "vector" else "stream_hex"
        assert VECTORS[name][key] == data, name


@pytest.mark.parametrize("cls", list(MESSAGE_TYPES.values()), ids=lambda cls: cls.__name__)
def test_every_message_has_a_spec_section_with_its_fields_in_wire_order(cls):
    section = message_section(cls)
    rows = re.findall(r"^\| `(\w+)` \| (\w+) \|", section, flags=re.M)
    assert [(name, spec.kind) for name, spec in wire_fields(cls)] == rows
    assert f"| 0x{cls.TYPE:02X} | {cls.__name__} | `{cls.NAME}` |" in SPEC
    assert any(
        kind == "vector" and VECTORS[name]["message"]["type"] == cls.NAME
        for kind, name, _ in example_blocks()
        if f"{kind} {name}" in section
    ), "the section needs an example from the vectors"


def test_the_error_code_table_lists_exactly_the_known_codes():
    table = SPEC.split("## Error codes", 1)[1].split("\n## ", 1)[0]
    codes = re.findall(r"^\| `([a-z-]+)` \|", table, flags=re.M)
    assert sorted(codes) == sorted(code.value for code in ErrorCode)


def test_the_spec_documents_every_reserved_range():
    for low, high, _ in RESERVED_TYPE_RANGES:
        assert f"| 0x{low:02X}-0x{high:02X} |" in SPEC
