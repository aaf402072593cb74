"""Message construction, field validation and the dict form, as behaviour sentences."""

from __future__ import annotations

import dataclasses

import pytest

from firmware_protocol import (
    MESSAGE_TYPES,
    AudioChunk,
    AudioFormat,
    AudioStart,
    AudioStop,
    Capability,
    Hello,
    Ping,
    ProtocolError,
    ReplyText,
    StopReason,
    Transcript,
    decode,
    encode,
    from_dict,
    to_dict,
)


def error_code(fn, *args, **kwargs) -> str:
    with pytest.raises(ProtocolError) as info:
        fn(*args, **kwargs)
    assert info.value.text
    return info.value.code


def test_truncated_hello_is_a_malformed_message():
    data = encode(Hello("esp32-01", firmware="1.0"))
    for size in range(1, len(data)):
        assert error_code(decode, data[:size]) == "malformed-message"


def test_empty_input_is_a_malformed_message():
    assert error_code(decode, b"") == "malformed-message"


def test_a_text_websocket_frame_is_refused_as_a_malformed_message():
    assert error_code(decode, "01000865737033322d3031") == "malformed-message"


def test_decode_accepts_bytearray_and_memoryview():
    data = encode(Ping(5))
    assert decode(bytearray(data)) == decode(memoryview(data)) == Ping(5)


def test_reserved_type_codes_are_unknown_and_name_their_purpose():
    with pytest.raises(ProtocolError) as info:
        decode(b"\x3a")
    assert info.value.code == "unknown-message-type"
    assert "expression" in info.value.text


@pytest.mark.parametrize(
    "device_id", ["", "a" * 65, "esp 32", "设备", "esp/32", "esp32\n", "ab#"]
)
def test_a_bad_device_id_is_a_malformed_message(device_id):
    assert error_code(Hello, device_id) == "malformed-message"


@pytest.mark.parametrize("device_id", ["a", "A" * 64, "esp32-01", "box.kitchen:01", "a_b"])
def test_a_device_id_of_1_to_64_allowed_chars_is_accepted(device_id):
    assert decode(encode(Hello(device_id))).device_id == device_id


def test_a_string_of_65535_utf8_bytes_fits_and_one_more_byte_does_not():
    longest = Transcript("中" * 21845)  # 3 bytes each = 65535
    assert decode(encode(longest)) == longest
    assert error_code(Transcript, "中" * 21845 + "a") == "malformed-message"


def test_a_string_with_a_lone_surrogate_cannot_be_built():
    assert error_code(Transcript, "\ud800") == "malformed-message"


@pytest.mark.parametrize(
    ("cls", "kwargs"),
    [
        (Ping, {"nonce": -1}),
        (Ping, {"nonce": 1 << 32}),
        (Ping, {"nonce": True}),
        (Ping, {"nonce": "1"}),
        (AudioStart, {"stream_id": 1 << 16}),
        (AudioStop, {"stream_id": 1, "reason": 3}),
        (Transcript, {"text": "hi", "final": 1}),
        (ReplyText, {"text": 5}),
        (AudioChunk, {"stream_id": 1, "seq": 1, "data": "not bytes"}),
        (Hello, {"device_id": "a", "protocol_version": 256}),
        (Hello, {"device_id": "a", "audio_in": {"codec": "opus"}}),
    ],
)
def test_constructing_a_message_with_an_out_of_range_field_raises_malformed_message(cls, kwargs):
    assert error_code(cls, **kwargs) == "malformed-message"


@pytest.mark.parametrize(
    "kwargs",
    [
        {"codec": "mp3"},
        {"sample_rate": 7999},
        {"sample_rate": 48001},
        {"channels": 0},
        {"channels": 3},
        {"sample_rate": 16000.0},
    ],
)
def test_an_audio_format_outside_the_spec_raises_malformed_message(kwargs):
    assert error_code(AudioFormat, **kwargs) == "malformed-message"


def test_audio_format_defaults_to_16_khz_mono_pcm_and_exposes_the_codec_as_a_string():
    fmt = AudioFormat()
    assert (fmt.codec, fmt.sample_rate, fmt.channels) == ("pcm_s16le", 16000, 1)
    assert AudioFormat("opus", 48000, 2).codec_code == 1


def test_messages_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        Ping(1).nonce = 2  # type: ignore[misc]


def test_hello_defaults_announce_audio_in_and_out_at_protocol_version_1():
    hello = Hello("esp32-01")
    assert hello.capabilities == Capability.AUDIO_IN | Capability.AUDIO_OUT
    assert hello.protocol_version == 1


def test_unknown_capability_bits_survive_a_round_trip():
    hello = decode(encode(Hello("a", capabilities=0x80000101)))
    assert int(hello.capabilities) == 0x80000101
    assert Capability.SCREEN in hello.capabilities


def test_audio_chunk_data_is_normalised_to_bytes():
    assert AudioChunk(1, 2, bytearray(b"\x01\x02")).data == b"\x01\x02"


def test_stop_reason_is_a_lower_case_name_in_the_dict_and_a_number_also_parses():
    msg = AudioStop(1, StopReason.ABORTED)
    assert to_dict(msg)["reason"] == "aborted"
    assert from_dict({"type": "audio_stop", "stream_id": 1, "reason": 1}) == msg


def test_from_dict_fills_defaults_for_missing_optional_fields():
    assert from_dict({"type": "hello", "device_id": "x"}) == Hello("x")


@pytest.mark.parametrize(
    ("d", "code"),
    [
        ({"type": "nope"}, "unknown-message-type"),
        ({}, "unknown-message-type"),
        ([], "malformed-message"),
        ({"type": "ping"}, "malformed-message"),
        ({"type": "ping", "nonce": 1, "extra": 2}, "malformed-message"),
        ({"type": "audio_chunk", "stream_id": 1, "seq": 1, "data": "zz"}, "malformed-message"),
        ({"type": "audio_stop", "stream_id": 1, "reason": "paused"}, "malformed-message"),
        ({"type": "audio_start", "stream_id": 1, "format": {"bitrate": 1}}, "malformed-message"),
        ({"type": "audio_start", "stream_id": 1, "format": "opus"}, "malformed-message"),
    ],
)
def test_from_dict_refuses_bad_input_with_a_protocol_error(d, code):
    assert error_code(from_dict, d) == code


def test_encode_refuses_objects_that_are_not_protocol_messages():
    with pytest.raises(TypeError):
        encode(object())  # type: ignore[arg-type]


def test_message_types_cannot_be_modified_at_run_time():
    with pytest.raises(TypeError):
        MESSAGE_TYPES[0x07] = Ping  # type: ignore[index]


def test_protocol_error_carries_a_code_and_a_text():
    err = ProtocolError("bad-crc", "CRC mismatch")
    assert (err.code, err.text) == ("bad-crc", "CRC mismatch")
    assert str(err) == "bad-crc: CRC mismatch"
