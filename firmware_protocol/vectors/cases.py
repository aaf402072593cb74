"""The golden vector cases. Edit here, then run `python -m firmware_protocol.vectors --write`.

Every case is fixed data (no randomness, no clock), so the generated JSON is deterministic.
"""

from __future__ import annotations

from cobs import cobs

from ..framing import crc16_ccitt_false
from ..messages import (
    Abort,
    Action,
    AudioChunk,
    AudioStart,
    AudioStop,
    Error,
    ExpressionSetup,
    Hello,
    Message,
    Mouth,
    Ping,
    Pong,
    ReadingAck,
    ReplyText,
    SensorReading,
    Sentiment,
    ServoKeyframes,
    TextInput,
    Transcript,
    VadEvent,
    Visemes,
    Welcome,
)
from ..values import AudioFormat, Capability, ReadingStatus, StopReason, Viseme

OPUS_48K_STEREO = AudioFormat("opus", 48000, 2)
PCM_8K = AudioFormat("pcm_s16le", 8000, 1)
ALL_CAPS = Capability(0x1FF)

# (name, note, message)
VALID: tuple[tuple[str, str, Message], ...] = (
    ("hello-minimal", "only device_id set; every other field at its default",
     Hello("esp32-01")),
    ("hello-full", "token, all known capabilities, opus out, non-ASCII firmware string",
     Hello("box.kitchen:01", token="secret-token", capabilities=ALL_CAPS,
           audio_in=AudioFormat("pcm_s16le", 16000, 1), audio_out=OPUS_48K_STEREO,
           firmware="voicebox 1.2.3 厨房")),
    ("hello-max-values", "64-char device id, version 255, every capability bit, 8 kHz in",
     Hello("A" * 32 + "z9._:-" + "b" * 26, protocol_version=255, capabilities=0xFFFFFFFF,
           audio_in=PCM_8K, audio_out=AudioFormat("pcm_s16le", 48000, 2))),
    ("welcome-empty-session", "empty session_id and server",
     Welcome("")),
    ("welcome-opus", "gateway will send 24 kHz mono opus",
     Welcome("s-0001", audio_out=AudioFormat("opus", 24000, 1), server="edge-voice-gateway 0.1.0")),
    ("ping-zero", "nonce 0", Ping(0)),
    ("ping-max", "nonce 0xFFFFFFFF", Ping(0xFFFFFFFF)),
    ("pong", "answer to a ping", Pong(0x12345678)),
    ("error-bad-sequence", "a gateway error code with ASCII text",
     Error("bad-sequence", "audio before hello")),
    ("error-chinese-text", "error text in Chinese",
     Error("asr-failed", "语音识别失败")),
    ("abort-empty", "button barge-in without a reason", Abort()),
    ("abort-reason", "button barge-in with a reason", Abort("button")),
    ("audio-start-pcm", "default format: 16 kHz mono pcm_s16le", AudioStart(1)),
    ("audio-start-opus-max", "max stream id, 48 kHz stereo opus",
     AudioStart(0xFFFF, OPUS_48K_STEREO)),
    ("audio-chunk-pcm", "four s16le samples (0, 1, -1, 32767); contains zero bytes",
     AudioChunk(1, 0, bytes.fromhex("00000100ffffff7f"))),
    ("audio-chunk-empty", "no samples: data may be empty", AudioChunk(7, 42, b"")),
    ("audio-chunk-long-nonzero", "max ids, 300 non-zero bytes: exercises COBS 0xFF blocks",
     AudioChunk(0xFFFF, 0xFFFFFFFF, bytes((i % 255) + 1 for i in range(300)))),
    ("audio-stop-end", "stream ended normally", AudioStop(1, StopReason.END)),
    ("audio-stop-aborted", "barge-in", AudioStop(2, StopReason.ABORTED)),
    ("audio-stop-error", "stream failed", AudioStop(3, StopReason.ERROR)),
    ("transcript-chinese", "final transcript in Chinese", Transcript("你好，小智")),
    ("transcript-partial", "partial (final = false)", Transcript("what time", final=False)),
    ("transcript-empty", "empty text", Transcript("")),
    ("reply-text-sentence", "first sentence of a reply, audio follows on stream 2",
     ReplyText("今天天气很好。", stream_id=2)),
    ("reply-text-final", "last sentence of a reply", ReplyText("Goodbye!", 3, final=True)),
    ("text-input", "a typed utterance", TextInput("What time is it?")),
    ("text-input-emoji", "4-byte UTF-8 sequence", TextInput("开灯 💡")),
    ("vad-event-speech-start", "speech began 1.5 s into the device audio",
     VadEvent(VadEvent.SPEECH_START, 1500)),
    ("vad-event-speech-end-max", "speech ended, max audio_ms",
     VadEvent(VadEvent.SPEECH_END, 0xFFFFFFFF)),
    ("sensor-reading-blood-pressure", "systolic, diastolic and pulse, device time 2025-12-01",
     SensorReading(7, "blood_pressure", 1764547200,
                   (("systolic", "mmHg", 120.0), ("diastolic", "mmHg", 80.0), ("pulse", "bpm", 72.0)))),
    ("sensor-reading-temperature-no-clock", "one fractional value, device clock unknown (0)",
     SensorReading(0xFFFFFFFF, "temperature", 0, (("celsius", "°C", 21.5),))),
    ("sensor-reading-empty", "no values (a bare event)", SensorReading(1, "button")),
    ("reading-ack-stored", "reading 7 stored", ReadingAck(7)),
    ("reading-ack-duplicate", "reading 7 was already stored", ReadingAck(7, ReadingStatus.DUPLICATE)),
    ("reading-ack-rejected", "implausible value, with the reason",
     ReadingAck(8, ReadingStatus.REJECTED, "reading-invalid", "systolic 400 mmHg is outside 40..300")),
    ("visemes-hello", "'Hello.': sil, kk(h), E, nn(l), oh, sil; times in ms from the stream start",
     Visemes(1, ((Viseme.SIL, 0, 40, 0), (Viseme.KK, 40, 60, 166), (Viseme.E, 100, 90, 166),
                 (Viseme.NN, 190, 70, 64), (Viseme.OH, 260, 180, 166), (Viseme.SIL, 440, 60, 0)))),
    ("visemes-empty", "no track (an empty sentence)", Visemes(0xFFFF)),
    ("mouth-25fps", "40 ms frames: closed, half, open, closed", Mouth(1, 40, bytes((0, 128, 255, 0)))),
    ("action-invite", "Fay's guidance.invite: intensity 0.74 as 74 %, priority 82",
     Action(3, "guidance.invite", "invite", "warm", 74, 82)),
    ("action-code-only", "only the code; the rest at defaults", Action(1, "social.thanks")),
    ("sentiment-positive", "+1.3 as 13 tenths", Sentiment(3, 13)),
    ("sentiment-min", "-2.0 as -20 tenths (two's complement 0xec)", Sentiment(3, -20)),
    ("servo-keyframes-wave", "wave on channel 2 (arm): 90 -> 150 -> 30 -> 90, orange LED, smile",
     ServoKeyframes(2, ((2, 90, 0), (2, 150, 250), (2, 30, 500), (2, 90, 750)), 0xFF8800, "smile")),
    ("expression-setup-10fps", "a small board wants Mouth frames of 100 ms", ExpressionSetup(100)),
)  # fmt: skip

_PCM16K = "00" + "00003e80" + "01"

# (name, note, message hex, error code)
INVALID: tuple[tuple[str, str, str, str], ...] = (
    ("empty", "no bytes at all", "", "malformed-message"),
    ("unknown-type-0x00", "type 0 is not assigned", "00", "unknown-message-type"),
    ("unknown-type-0x07", "unassigned type", "0700000001", "unknown-message-type"),
    ("reserved-expression-0x36", "reserved for expression messages", "3600",
     "unknown-message-type"),
    ("reserved-sensor-0x4f", "reserved for sensor messages", "4f", "unknown-message-type"),
    ("reserved-servo-0x5f", "reserved for servo commands", "5f", "unknown-message-type"),
    ("reserved-vendor-0xf0", "reserved for vendor / experimental", "f0", "unknown-message-type"),
    ("hello-only-type", "hello with no fields", "01", "malformed-message"),
    ("hello-truncated-length", "half of the device_id length", "0100", "malformed-message"),
    ("hello-truncated-device-id", "device_id length 8, only 3 bytes", "010008657370",
     "malformed-message"),
    ("hello-truncated-audio-out", "hello cut inside audio_out",
     "0100026964" "0000" "01" "00000003" + _PCM16K + "0000003e", "malformed-message"),
    ("hello-empty-device-id", "device_id must be 1..64 chars",
     "010000" "0000" "01" "00000003" + _PCM16K + _PCM16K + "0000", "malformed-message"),
    ("hello-device-id-space", "space is not allowed in a device id",
     "010006" + "657370203332" + "0000" "01" "00000003" + _PCM16K + _PCM16K + "0000",
     "malformed-message"),
    ("hello-device-id-non-ascii", "device id must be ASCII [A-Za-z0-9._:-]",
     "010006" + "e8aebee5a487" + "0000" "01" "00000003" + _PCM16K + _PCM16K + "0000",
     "malformed-message"),
    ("hello-device-id-65-chars", "device id longer than 64",
     "010041" + "61" * 65 + "0000" "01" "00000003" + _PCM16K + _PCM16K + "0000",
     "malformed-message"),
    ("ping-truncated", "nonce has 3 of 4 bytes", "03000000", "malformed-message"),
    ("ping-trailing-byte", "one byte after the last field", "030000000100", "malformed-message"),
    ("pong-trailing-bytes", "several bytes after the last field", "0400000001deadbeef",
     "malformed-message"),
    ("transcript-bad-bool", "bool byte 2", "2000016102", "malformed-message"),
    ("transcript-bool-0xff", "bool byte 0xff", "200000ff", "malformed-message"),
    ("transcript-missing-bool", "ends after text", "20000161", "malformed-message"),
    ("transcript-bad-utf8", "0xc3 0x28 is not UTF-8", "200002c32801", "malformed-message"),
    ("transcript-truncated-utf8", "a 3-byte sequence cut after 2 bytes", "200002e4bd01",
     "malformed-message"),
    ("transcript-overlong-utf8", "overlong encoding of NUL (c0 80) is not UTF-8",
     "200002c08001", "malformed-message"),
    ("transcript-surrogate-utf8", "an encoded UTF-16 surrogate (ed a0 80) is not UTF-8",
     "200003eda08001", "malformed-message"),
    ("text-input-length-past-end", "string length larger than the message", "22ffff61",
     "malformed-message"),
    ("audio-start-bad-codec", "codec code 2 does not exist", "100001" "0200003e8001",
     "malformed-message"),
    ("audio-start-rate-too-low", "7999 Hz", "100001" "0000001f3f01", "malformed-message"),
    ("audio-start-rate-too-high", "48001 Hz", "100001" "000000bb8101", "malformed-message"),
    ("audio-start-rate-zero", "0 Hz", "100001" "000000000001", "malformed-message"),
    ("audio-start-zero-channels", "channels 0", "100001" "0000003e8000", "malformed-message"),
    ("audio-start-three-channels", "channels 3", "100001" "0000003e8003", "malformed-message"),
    ("audio-start-truncated-format", "format cut after the sample rate", "100001" "0000003e80",
     "malformed-message"),
    ("audio-chunk-truncated-seq", "seq has 2 of 4 bytes", "1100010000", "malformed-message"),
    ("audio-stop-bad-reason", "reason 3 is not a StopReason", "12000103", "malformed-message"),
    ("audio-stop-truncated", "reason missing", "120001", "malformed-message"),
    ("welcome-truncated", "welcome cut inside protocol_version", "020000", "malformed-message"),
    ("reply-text-bad-bool", "final byte 7", "210000000107", "malformed-message"),
    ("vad-event-bad-event", "event 2 is not a SpeechEvent", "230200000000", "malformed-message"),
    ("sensor-reading-nan", "value is a NaN", "40" "00000001" "0001" "78" "00000000" "01"
     "0001" "76" "0000" "7fc00000", "malformed-message"),
    ("sensor-reading-infinity", "value is +infinity", "40" "00000001" "0001" "78" "00000000" "01"
     "0001" "76" "0000" "7f800000", "malformed-message"),
    ("sensor-reading-duplicate-name", "two values named v", "40" "00000001" "0001" "78" "00000000"
     "02" "0001" "76" "0000" "3f800000" "0001" "76" "0000" "3f800000", "malformed-message"),
    ("sensor-reading-bad-kind", "kind must start with a lower-case letter", "40" "00000001" "0001"
     "58" "00000000" "00", "malformed-message"),
    ("sensor-reading-truncated-value", "f32 cut after 2 bytes", "40" "00000001" "0001" "78"
     "00000000" "01" "0001" "76" "0000" "3f80", "malformed-message"),
    ("reading-ack-bad-status", "status 3 is not a ReadingStatus", "41" "00000001" "03" "0000" "0000",
     "malformed-message"),
    ("visemes-bad-viseme", "viseme 15 does not exist", "30" "0001" "01" "0f" "0000" "0028" "00",
     "malformed-message"),
    ("visemes-truncated-record", "count 2, one record", "30" "0001" "02" "00" "0000" "0028" "00",
     "malformed-message"),
    ("sentiment-truncated", "tenths missing", "33" "0001", "malformed-message"),
    ("expression-setup-empty", "mouth_frame_ms missing", "35", "malformed-message"),
    ("servo-keyframes-truncated", "keyframe cut after the angle", "34" "0001" "01" "02" "5a",
     "malformed-message"),
)  # fmt: skip



def _stream(payload: bytes, crc_xor: int = 0, crc_of: bytes | None = None) -> str:
    """COBS(payload || CRC(crc_of or payload) ^ crc_xor) + 0x00, as hex: well-framed bad frames."""
    crc = crc16_ccitt_false(payload if crc_of is None else crc_of) ^ crc_xor
    return (cobs.encode(payload + crc.to_bytes(2, "big")) + b"\x00").hex()


# (name, note, stream hex including the 0x00 delimiter, error code, max_frame_bytes or None)
INVALID_STREAM: tuple[tuple[str, str, str, str, int | None], ...] = (
    ("stream-bad-crc", "ping(1) with the CRC's low byte flipped",
     _stream(bytes.fromhex("0300000001"), crc_xor=0x00FF), "bad-crc", None),
    ("stream-bad-crc-payload-bit", "ping(3) carrying the CRC of ping(1): one payload bit flipped",
     _stream(bytes.fromhex("0300000003"), crc_of=bytes.fromhex("0300000001")), "bad-crc", None),
    ("stream-bad-cobs", "a COBS code byte pointing past the end of the frame",
     "05010200", "bad-framing", None),
    ("stream-too-short-for-crc", "decodes to one byte: no room for a CRC",
     "020300", "bad-framing", None),
    ("stream-crc-ok-unknown-type", "good COBS and CRC around type 0x07",
     _stream(b"\x07"), "unknown-message-type", None),
    ("stream-crc-ok-truncated-message", "good COBS and CRC around a ping with 1 nonce byte",
     _stream(b"\x03\x00"), "malformed-message", None),
    ("stream-crc-ok-empty-message", "good COBS and CRC (0xffff) around zero message bytes",
     _stream(b""), "malformed-message", None),
    ("stream-frame-too-large", "9 encoded bytes with max_frame_bytes = 8",
     "090102030405060708" "00", "frame-too-large", 8),
)  # fmt: skip
