"""The golden vectors (shared with the C codec) hold for this implementation."""

from __future__ import annotations

import pytest

from firmware_protocol import (
    DEFAULT_MAX_FRAME_BYTES,
    MESSAGE_TYPES,
    ErrorCode,
    ProtocolError,
    StreamDeframer,
    decode,
    encode,
    encode_stream_frame,
    from_dict,
    to_dict,
)
from firmware_protocol.messages import RESERVED_TYPE_RANGES
from firmware_protocol.vectors import load_invalid, load_valid
from firmware_protocol.vectors.__main__ import main as vectors_main
from firmware_protocol.vectors.generate import expected_files

VALID = load_valid()
INVALID = load_invalid()
MESSAGE_INVALID = [v for v in INVALID if "hex" in v]
STREAM_INVALID = [v for v in INVALID if "stream_hex" in v]


def ids(vectors):
    return [v["name"] for v in vectors]


@pytest.mark.parametrize("vector", VALID, ids=ids(VALID))
def test_golden_message_encodes_to_its_hex(vector):
    assert encode(from_dict(vector["message"])).hex() == vector["hex"]


@pytest.mark.parametrize("vector", VALID, ids=ids(VALID))
def test_golden_hex_decodes_to_its_message(vector):
    msg = decode(bytes.fromhex(vector["hex"]))
    assert msg == from_dict(vector["message"])
    assert to_dict(msg) == vector["message"]


@pytest.mark.parametrize("vector", VALID, ids=ids(VALID))
def test_golden_message_frames_to_its_stream_hex_and_back(vector):
    msg = from_dict(vector["message"])
    assert encode_stream_frame(msg).hex() == vector["stream_hex"]
    assert StreamDeframer().feed(bytes.fromhex(vector["stream_hex"])) == [msg]


@pytest.mark.parametrize("vector", MESSAGE_INVALID, ids=ids(MESSAGE_INVALID))
def test_invalid_golden_hex_raises_its_error_code(vector):
    with pytest.raises(ProtocolError) as info:
        decode(bytes.fromhex(vector["hex"]))
    assert info.value.code == vector["error"]


@pytest.mark.parametrize("vector", STREAM_INVALID, ids=ids(STREAM_INVALID))
def test_invalid_golden_stream_reports_exactly_its_error_code(vector):
    deframer = StreamDeframer(vector.get("max_frame_bytes", DEFAULT_MAX_FRAME_BYTES))
    items = deframer.feed(bytes.fromhex(vector["stream_hex"]))
    assert [type(item) for item in items] == [ProtocolError]
    assert items[0].code == vector["error"]


def test_golden_vectors_cover_every_message_type():
    covered = {v["message"]["type"] for v in VALID}
    assert covered == {cls.NAME for cls in MESSAGE_TYPES.values()}


def test_invalid_vectors_cover_every_protocol_error_code_and_reserved_range():
    protocol_codes = {
        ErrorCode.MALFORMED_MESSAGE,
        ErrorCode.UNKNOWN_MESSAGE_TYPE,
        ErrorCode.FRAME_TOO_LARGE,
        ErrorCode.BAD_CRC,
        ErrorCode.BAD_FRAMING,
    }
    assert {v["error"] for v in INVALID} == protocol_codes
    first_bytes = {bytes.fromhex(v["hex"])[0] for v in MESSAGE_INVALID if v["hex"]}
    for low, high, _ in RESERVED_TYPE_RANGES:
        assert any(low <= b <= high for b in first_bytes), hex(low)


def test_vector_names_are_unique():
    names = ids(VALID) + ids(INVALID)
    assert len(names) == len(set(names))


def test_vector_files_match_the_generator_byte_for_byte():
    for path, text in expected_files().items():
        assert path.read_text(encoding="utf-8") == text, f"{path.name}: run --write"


def test_vector_check_command_succeeds_on_the_committed_files(capsys):
    assert vectors_main(["--check"]) == 0
    assert "up to date" in capsys.readouterr().out
