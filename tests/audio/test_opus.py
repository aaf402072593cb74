"""Opus over the real libopus: a tone survives the round trip (energy and pitch), frames are cut
and padded as the xiaozhi boxes expect, bad packets raise a coded error."""

from __future__ import annotations

import numpy as np
import pytest

from gateway.audio.opus import OpusDecodeError, OpusDecoder, OpusEncoder
from gateway.audio.pcm import float_to_s16le, s16le_to_float


def tone(freq: float, seconds: float, rate: int, level: float = 0.3) -> np.ndarray:
    t = np.arange(int(seconds * rate)) / rate
    return (level * np.sin(2 * np.pi * freq * t)).astype(np.float32)


def dominant_hz(samples: np.ndarray, rate: int) -> float:
    spectrum = np.abs(np.fft.rfft(samples * np.hanning(samples.size)))
    return float(np.fft.rfftfreq(samples.size, 1 / rate)[int(np.argmax(spectrum))])


@pytest.mark.parametrize(("rate", "frame_ms"), [(16000, 60), (24000, 60), (24000, 20), (16000, 40)])
def test_a_tone_keeps_its_energy_and_frequency_through_opus(rate: int, frame_ms: int) -> None:
    sent = tone(440.0, 1.2, rate)
    enc, dec = OpusEncoder(rate, frame_ms), OpusDecoder(rate)
    packets = enc.encode(float_to_s16le(sent)) + enc.flush()
    assert len(packets) == -(-sent.size // enc.frame_samples)  # every frame, the last one padded
    got = np.concatenate([s16le_to_float(dec.decode(p)) for p in packets])
    assert got.size == len(packets) * enc.frame_samples
    steady = got[rate // 5 : rate]  # skip the codec's start-up
    rms_in, rms_out = float(np.sqrt(np.mean(sent[rate // 5 : rate] ** 2))), float(np.sqrt(np.mean(steady**2)))
    assert abs(rms_out / rms_in - 1) < 0.2
    assert abs(dominant_hz(steady, rate) - 440.0) < 5


def test_partial_frames_wait_for_more_pcm_and_flush_pads_them_with_silence() -> None:
    enc = OpusEncoder(16000, 60)
    frame = enc.frame_samples * 2
    assert enc.encode(bytes(frame - 2)) == []
    assert enc.pending_ms == pytest.approx(60 - 1000 / 16000)
    assert len(enc.encode(bytes(4))) == 1  # the frame completes; 2 bytes carry over
    assert len(enc.flush()) == 1 and enc.pending_ms == 0
    assert enc.flush() == []
    enc.encode(bytes(100))
    enc.drop()
    assert enc.flush() == []


def test_packets_of_other_frame_durations_decode_too() -> None:
    dec = OpusDecoder(16000)
    for frame_ms in (20, 40, 60):
        enc = OpusEncoder(16000, frame_ms)
        (packet,) = enc.encode(float_to_s16le(tone(300, frame_ms / 1000, 16000)))
        assert len(dec.decode(packet)) == 16000 * frame_ms // 1000 * 2


def test_garbage_and_empty_packets_raise_a_coded_error() -> None:
    dec = OpusDecoder(16000)
    with pytest.raises(OpusDecodeError) as info:
        dec.decode(b"")
    assert info.value.code == "bad-audio"
    with pytest.raises(OpusDecodeError):
        dec.decode(b"\xff" * 3)  # code 3 packet with a bad frame count


def test_unsupported_rates_and_durations_are_refused() -> None:
    with pytest.raises(ValueError, match="sample rate"):
        OpusEncoder(22050)
    with pytest.raises(ValueError, match="frame duration"):
        OpusEncoder(16000, 30)
