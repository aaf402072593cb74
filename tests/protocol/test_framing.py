"""Byte-stream framing: COBS + CRC-16/CCITT-FALSE + 0x00, resync and size limits."""

from __future__ import annotations

import pytest

from firmware_protocol import (
    AudioChunk,
    Ping,
    Pong,
    ProtocolError,
    StreamDeframer,
    crc16_ccitt_false,
    decode_stream_frame,
    encode_stream_frame,
)


def codes(items):
    return [item.code if isinstance(item, ProtocolError) else item for item in items]


def test_crc16_ccitt_false_has_the_standard_check_value():
    assert crc16_ccitt_false(b"123456789") == 0x29B1


def test_crc16_of_nothing_is_the_initial_value():
    assert crc16_ccitt_false(b"") == 0xFFFF


def test_stream_frame_is_cobs_of_message_and_big_endian_crc_then_a_zero():
    # Ping(1) = 03 00000001, CRC 0xefff -> COBS 02 03 01 01 04 01 ef ff, then 00.
    assert encode_stream_frame(Ping(1)).hex() == "020301010401efff00"


def test_deframer_resynchronises_after_garbage_and_decodes_the_next_frame():
    deframer = StreamDeframer()
    items = deframer.feed(b"\x13\x37garbage\x00" + encode_stream_frame(Ping(7)))
    assert codes(items) == ["bad-framing", Ping(7)]


def test_garbage_without_a_delimiter_is_reported_when_the_delimiter_arrives():
    deframer = StreamDeframer()
    assert deframer.feed(b"\x05\x01\x02") == []
    assert codes(deframer.feed(b"\x00" + encode_stream_frame(Pong(1)))) == ["bad-framing", Pong(1)]


def test_a_frame_with_a_wrong_crc_is_bad_crc_and_the_next_frame_still_decodes():
    bad = bytearray(encode_stream_frame(Ping(1)))
    bad[-2] ^= 0x01
    items = StreamDeframer().feed(bytes(bad) + encode_stream_frame(Ping(2)))
    assert codes(items) == ["bad-crc", Ping(2)]


def test_consecutive_zero_bytes_are_idle_filler_and_yield_nothing():
    deframer = StreamDeframer()
    assert deframer.feed(b"\x00" * 10) == []
    assert deframer.feed(b"\x00\x00" + encode_stream_frame(Ping(3)) + b"\x00\x00") == [Ping(3)]


def test_an_oversize_frame_yields_one_frame_too_large_error_and_is_skipped():
    deframer = StreamDeframer(max_frame_bytes=16)
    big = encode_stream_frame(AudioChunk(1, 2, bytes(range(1, 60))))
    items = []
    for i in range(0, len(big), 5):  # arrives in small pieces
        items += deframer.feed(big[i : i + 5])
        assert deframer.buffered <= 16
    items += deframer.feed(encode_stream_frame(Ping(9)))
    assert codes(items) == ["frame-too-large", Ping(9)]


def test_oversize_error_is_reported_before_the_delimiter_arrives():
    deframer = StreamDeframer(max_frame_bytes=8)
    assert codes(deframer.feed(b"\x01" * 9)) == ["frame-too-large"]
    assert deframer.feed(b"\x01" * 1000) == []
    assert deframer.buffered == 0
    assert deframer.feed(b"\x00" + encode_stream_frame(Ping(1))) == [Ping(1)]


def test_a_frame_exactly_at_the_limit_is_accepted():
    frame = encode_stream_frame(Ping(1))
    assert StreamDeframer(max_frame_bytes=len(frame) - 1).feed(frame) == [Ping(1)]
    assert codes(StreamDeframer(max_frame_bytes=len(frame) - 2).feed(frame)) == [
        "frame-too-large"
    ]


def test_reset_drops_a_partial_frame():
    deframer = StreamDeframer()
    deframer.feed(encode_stream_frame(Ping(4))[:3])
    deframer.reset()
    assert deframer.buffered == 0
    assert deframer.feed(encode_stream_frame(Ping(5))) == [Ping(5)]


def test_a_partial_frame_waits_for_the_rest_of_its_bytes():
    frame = encode_stream_frame(Ping(4))
    deframer = StreamDeframer()
    assert deframer.feed(frame[:3]) == []
    assert deframer.buffered == 3
    assert deframer.feed(frame[3:]) == [Ping(4)]


def test_the_default_frame_limit_fits_any_message_of_up_to_4077_bytes():
    fits = AudioChunk(1, 1, b"\x01" * (4077 - 7))  # 7 bytes of header fields
    too_big = AudioChunk(1, 1, b"\x01" * (4078 - 7))
    assert StreamDeframer().feed(encode_stream_frame(fits)) == [fits]
    assert codes(StreamDeframer().feed(encode_stream_frame(too_big))) == ["frame-too-large"]


def test_a_zero_max_frame_size_is_refused():
    with pytest.raises(ValueError):
        StreamDeframer(max_frame_bytes=0)


@pytest.mark.parametrize(
    ("frame", "code"),
    [(b"", "bad-framing"), (b"\x02\x03", "bad-framing"), (b"\x05\x01", "bad-framing")],
)
def test_decode_stream_frame_rejects_frames_without_room_for_a_crc(frame, code):
    with pytest.raises(ProtocolError) as info:
        decode_stream_frame(frame)
    assert info.value.code == code
