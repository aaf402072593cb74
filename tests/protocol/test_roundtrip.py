"""Every message class, discovered from MESSAGE_TYPES, round-trips through every codec."""

from __future__ import annotations

import dataclasses
import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from firmware_protocol import (
    MESSAGE_TYPES,
    Message,
    StreamDeframer,
    decode,
    encode,
    encode_stream_frame,
    from_dict,
    to_dict,
)

from .strategies import ANY_MESSAGE, message_strategy

CLASSES = sorted(MESSAGE_TYPES.values(), key=lambda cls: cls.TYPE)
FAST = settings(max_examples=60, deadline=None)


def snake_case(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


@pytest.mark.parametrize("cls", CLASSES, ids=lambda cls: cls.__name__)
def test_every_message_class_has_a_matching_type_code_and_snake_case_name(cls):
    assert MESSAGE_TYPES[cls.TYPE] is cls
    assert cls.NAME == snake_case(cls.__name__)
    assert issubclass(cls, Message)


@pytest.mark.parametrize("cls", CLASSES, ids=lambda cls: cls.__name__)
def test_every_message_round_trips_through_bytes(cls):
    @FAST
    @given(message_strategy(cls))
    def check(msg):
        data = encode(msg)
        assert data[0] == cls.TYPE
        assert decode(data) == msg

    check()


@pytest.mark.parametrize("cls", CLASSES, ids=lambda cls: cls.__name__)
def test_every_message_round_trips_through_a_json_dict(cls):
    @FAST
    @given(message_strategy(cls))
    def check(msg):
        d = to_dict(msg)
        assert d["type"] == cls.NAME
        assert from_dict(json.loads(json.dumps(d))) == msg

    check()


@pytest.mark.parametrize("cls", CLASSES, ids=lambda cls: cls.__name__)
def test_every_message_round_trips_through_a_stream_frame(cls):
    @FAST
    @given(message_strategy(cls))
    def check(msg):
        frame = encode_stream_frame(msg)
        assert frame.endswith(b"\x00") and b"\x00" not in frame[:-1]
        assert StreamDeframer(max_frame_bytes=len(frame)).feed(frame) == [msg]

    check()


@settings(max_examples=80, deadline=None)
@given(st.lists(ANY_MESSAGE, max_size=8), st.data())
def test_concatenated_stream_frames_fed_in_random_splits_yield_every_message_in_order(
    messages, data
):
    stream = b"".join(encode_stream_frame(msg) for msg in messages)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=10)))
    deframer = StreamDeframer()
    received = []
    for start, end in zip([0, *cuts], [*cuts, len(stream)]):
        received += deframer.feed(stream[start:end])
    assert received == messages
    assert deframer.buffered == 0


@settings(max_examples=40, deadline=None)
@given(st.lists(ANY_MESSAGE, min_size=1, max_size=5))
def test_stream_fed_one_byte_at_a_time_yields_every_message(messages):
    stream = b"".join(encode_stream_frame(msg) for msg in messages)
    deframer = StreamDeframer()
    received = [item for i in range(len(stream)) for item in deframer.feed(stream[i : i + 1])]
    assert received == messages


@pytest.mark.parametrize("cls", CLASSES, ids=lambda cls: cls.__name__)
def test_a_decoded_message_is_what_its_constructor_makes_of_the_same_fields(cls):
    """decode checks each field as it reads it (read_checked) instead of through __init__: what
    it accepts the constructor accepts too, with the same values of the same types. Tried on
    valid messages with each of their bytes in turn replaced by a few telling values."""

    def same_as_built(data: bytes) -> None:
        try:
            msg = decode(data)
        except Exception as exc:
            assert type(exc).__name__ == "ProtocolError"
            return
        fields = {f.name: getattr(msg, f.name) for f in dataclasses.fields(msg)}
        built = cls(**fields)  # raises when decode let a value through that __init__ refuses
        assert built == msg and hash(built) == hash(msg)
        assert all(type(getattr(built, name)) is type(value) for name, value in fields.items())

    @settings(max_examples=25, deadline=None)
    @given(message_strategy(cls).map(encode))
    def check(data):
        same_as_built(data)
        for at in range(1, min(len(data), 200)):
            for byte in (0x00, 0x01, 0x23, 0x41, 0x7F, 0x80, 0xFF):  # '#' and 'A' for names, 0x7F.. f32 NaN/inf
                same_as_built(data[:at] + bytes((byte,)) + data[at + 1:])

    check()
