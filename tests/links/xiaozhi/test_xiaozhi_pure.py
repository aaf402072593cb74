"""The pure parts of the xiaozhi adapter: framing, the emotion table, the box's queue."""

from __future__ import annotations

import logging
import struct

import pytest

from firmware_protocol import ProtocolError
from gateway.links.xiaozhi import framing
from gateway.links.xiaozhi.emotions import EmotionTable
from gateway.links.xiaozhi.identity import bearer_token, device_id_of
from gateway.links.xiaozhi.playback import BoxPlayback


@pytest.mark.parametrize("version", [1, 2, 3])
def test_audio_frames_round_trip_in_every_protocol_version(version):
    frame = framing.decode_binary(framing.encode_audio(b"opus!", version, 120), version)
    assert (frame.kind, frame.payload) == (framing.TYPE_OPUS, b"opus!")
    assert frame.timestamp_ms == (120 if version == 2 else 0)


def test_the_v2_and_v3_headers_are_the_firmwares_big_endian_structs():
    assert framing.encode_audio(b"ab", 2, 7) == struct.pack(">HHIII", 2, 0, 0, 7, 2) + b"ab"
    assert framing.encode_audio(b"ab", 3) == b"\x00\x00\x00\x02ab"
    assert framing.decode_binary(struct.pack(">BBH", 1, 0, 2) + b"{}", 3).kind == framing.TYPE_JSON


@pytest.mark.parametrize(("data", "version"), [(b"\x00\x00", 3), (b"\x00\x00\x00\x09ab", 3), (b"\x00" * 15, 2)])
def test_short_or_inconsistent_frames_raise_malformed_message(data, version):
    with pytest.raises(ProtocolError) as info:
        framing.decode_binary(data, version)
    assert info.value.code == "malformed-message"


def test_protocol_versions_other_than_1_2_3_are_refused():
    assert framing.check_version(None) == 1 and framing.check_version("3") == 3
    for bad in ("4", "x", "0"):
        with pytest.raises(ProtocolError) as info:
            framing.check_version(bad)
        assert info.value.code == "unsupported-protocol-version"


def test_box_identity_comes_from_the_mac_and_the_bearer_header():
    assert device_id_of("A0:B1:C2:D3:E4:F5") == "xiaozhi-a0b1c2d3e4f5"
    assert device_id_of("not-a-mac") is None and device_id_of("") is None
    assert bearer_token("Bearer abc") == "abc" and bearer_token("") == ""


def test_the_shipped_emotion_table_maps_every_action_code_and_the_sentiment_range(tmp_path):
    from tests.conftest import ROOT

    table = EmotionTable.load(ROOT / "config" / "xiaozhi_emotions.yaml")
    codes = {line.split(",")[0] for line in (ROOT / "config" / "action_rules.csv").read_text().splitlines()[1:] if line}
    assert codes <= set(table.actions)
    assert table.pick("emotion.celebrate", -2) == "laughing"  # an action wins over the sentiment
    assert [table.pick(None, s) for s in (2, 1, 0, -1, -2)] == ["laughing", "happy", "neutral", "sad", "crying"]


def test_bad_emotion_rows_are_reported_with_their_line_and_skipped(tmp_path, caplog):
    path = tmp_path / "emotions.yaml"
    path.write_text("actions:\n  greeting.hello: happy\n  farewell.goodbye: ecstatic\nsentiment:\n  5: happy\n  0: neutral\nextra: 1\n")
    caplog.set_level(logging.WARNING)
    table = EmotionTable.load(path)
    assert table.actions == {"greeting.hello": "happy"} and table.sentiment == ((0.0, "neutral"),)
    text = caplog.text
    assert f"{path}:3: 'ecstatic' is not a firmware emotion" in text
    assert f"{path}:5: sentiment threshold 5.0 is outside -2..2" in text and f"{path}:7: unknown section" in text


def test_the_box_queue_never_holds_more_than_max_ahead():
    box, now = BoxPlayback(max_ahead_ms=300), 10.0
    waits = []
    for _ in range(8):  # a burst of 60 ms frames
        wait = box.wait_before(60, now)
        waits.append(round(wait, 3))
        now += wait
        box.sent(60, now)
        assert box.queued_ms(now) <= 300 + 1e-6
    assert waits[:5] == [0.0] * 5 and waits[5:] == [0.06] * 3
    box.clear()
    assert box.wait_before(60, now) == 0
