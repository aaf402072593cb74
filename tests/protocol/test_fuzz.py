"""Garbage in never crashes: only ProtocolError comes out of any decode function."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from firmware_protocol import (
    MESSAGE_TYPES,
    Message,
    ProtocolError,
    StreamDeframer,
    decode,
    decode_stream_frame,
    encode,
    from_dict,
    to_dict,
)
from firmware_protocol.message import wire_fields
from firmware_protocol.messages import MESSAGE_NAMES
from firmware_protocol.text_fields import BytesRest
from firmware_protocol.vectors import load_valid

FUZZ = settings(max_examples=300, deadline=None)
VALID = load_valid()
KNOWN_CODES = sorted(MESSAGE_TYPES)


def decode_or_error(data: bytes) -> Message | ProtocolError:
    try:
        return decode(data)
    except ProtocolError as exc:
        assert exc.code in {"malformed-message", "unknown-message-type"}
        return exc


def assert_canonical(data: bytes) -> None:
    """Bytes either fail with ProtocolError or decode to a message that re-encodes to them."""
    result = decode_or_error(data)
    if isinstance(result, Message):
        assert encode(result) == data


@FUZZ
@given(st.binary(max_size=120))
def test_arbitrary_bytes_decode_to_a_message_or_raise_protocol_error(data):
    assert_canonical(data)


@FUZZ
@given(st.sampled_from(KNOWN_CODES), st.binary(max_size=80))
def test_arbitrary_fields_after_a_known_type_code_decode_or_raise_protocol_error(code, rest):
    assert_canonical(bytes([code]) + rest)


@FUZZ
@given(st.binary(max_size=120))
def test_arbitrary_bytes_as_a_stream_frame_only_raise_protocol_error(data):
    try:
        decode_stream_frame(data.replace(b"\x00", b""))
    except ProtocolError:
        pass


@FUZZ
@given(st.lists(st.binary(max_size=60), max_size=8), st.integers(1, 64))
def test_stream_deframer_turns_arbitrary_bytes_into_messages_and_errors_only(chunks, limit):
    deframer = StreamDeframer(max_frame_bytes=limit)
    for chunk in chunks:
        for item in deframer.feed(chunk):
            assert isinstance(item, (Message, ProtocolError))
        assert deframer.buffered <= limit


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(VALID), st.data())
def test_a_valid_vector_with_a_changed_byte_decodes_or_raises_protocol_error(vector, data):
    raw = bytearray.fromhex(vector["hex"])
    index = data.draw(st.integers(0, len(raw) - 1))
    raw[index] = data.draw(st.integers(0, 255))
    assert_canonical(bytes(raw))


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(VALID), st.data())
def test_a_valid_stream_frame_with_a_changed_byte_yields_only_messages_or_errors(vector, data):
    raw = bytearray.fromhex(vector["stream_hex"])
    index = data.draw(st.integers(0, len(raw) - 1))
    raw[index] = data.draw(st.integers(0, 255))
    items = StreamDeframer().feed(bytes(raw) + b"\x00")
    assert all(isinstance(item, (Message, ProtocolError)) for item in items)


def _bytes_rest_start(vector) -> int:
    """Where a trailing bytes_rest field starts (a cut inside it is a valid shorter message)."""
    name, spec = wire_fields(MESSAGE_NAMES[vector["message"]["type"]])[-1]
    if not isinstance(spec, BytesRest):
        return len(bytes.fromhex(vector["hex"])) + 1
    return len(bytes.fromhex(vector["hex"])) - len(bytes.fromhex(vector["message"][name]))


@pytest.mark.parametrize("vector", VALID, ids=[v["name"] for v in VALID])
def test_every_truncation_of_a_valid_vector_is_an_error_or_a_shorter_bytes_rest(vector):
    raw = bytes.fromhex(vector["hex"])
    for size in range(len(raw)):
        result = decode_or_error(raw[:size])
        if isinstance(result, Message):
            assert size >= _bytes_rest_start(vector)
            assert encode(result) == raw[:size]
        else:
            assert result.code == "malformed-message"


@pytest.mark.parametrize("vector", VALID, ids=[v["name"] for v in VALID])
def test_every_single_bit_flip_in_a_golden_stream_frame_is_reported_not_decoded(vector):
    frame = bytes.fromhex(vector["stream_hex"])
    for index in range(len(frame) - 1):
        for bit in range(8):
            damaged = bytearray(frame)
            damaged[index] ^= 1 << bit
            items = StreamDeframer().feed(bytes(damaged))
            assert items and all(isinstance(item, ProtocolError) for item in items), (index, bit)


FIELD_NAMES = sorted({f for v in VALID for f in v["message"] if f != "type"})
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.sampled_from(["codec", "sample_rate", "channels", "x"]), inner),
    max_leaves=6,
)


@FUZZ
@given(
    st.sampled_from(sorted(cls.NAME for cls in MESSAGE_TYPES.values())) | st.text(max_size=5),
    st.dictionaries(st.sampled_from(FIELD_NAMES), JSON, max_size=6),
)
def test_from_dict_on_arbitrary_json_returns_a_message_or_raises_protocol_error(name, fields):
    try:
        msg = from_dict({"type": name, **fields})
    except ProtocolError:
        return
    assert from_dict(to_dict(msg)) == msg
