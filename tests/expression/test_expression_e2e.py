"""End to end on the fake engines: a spoken "thank you, goodbye" yields audio plus Action, Sentiment
and a viseme track per sentence, sent before the sentence's first audio chunk. (The real voice's
phoneme timings and visemes are tested in test_visemes.py.)"""

from __future__ import annotations

import asyncio

import pytest

from firmware_protocol import Action, Capability, Mouth, Sentiment, ServoKeyframes, Visemes
from gateway.cli.virtual_box import simulate
from tests.conftest import words

pytestmark = pytest.mark.asyncio(loop_scope="session")

ALL = (Capability.AUDIO_IN | Capability.AUDIO_OUT | Capability.VISEMES | Capability.MOUTH
       | Capability.ACTION | Capability.SERVO)


async def test_thank_you_goodbye_yields_thanks_and_farewell_actions_and_visemes_matching_the_audio(
        fake_ws_gateway, fake_speak) -> None:
    audio, rate = fake_speak("Thank you, goodbye.")
    events: list[dict] = []
    result = await simulate(fake_ws_gateway, audio, rate, device_id="box-expr", out_rate=16000, speed=2.0,
                            timeout=30, emit=events.append, capabilities=ALL)

    assert "".join(words(result.transcript)) == "thankyougoodbye"  # "goodbye" or "good-bye"
    assert result.audio_seconds > 0.8
    codes = [m.code for m in result.expression if isinstance(m, Action)]
    assert codes == ["social.thanks", "farewell.goodbye"]
    assert all(isinstance(m, Sentiment) and -20 <= m.tenths <= 20
               for m in result.expression if isinstance(m, Sentiment))
    streams = [sid for name, sid in result.stream_log if name == "audio_start"]
    assert len(streams) == 2
    for sid in streams:
        track = [v for m in result.expression if isinstance(m, Visemes) and m.stream_id == sid for v in m.visemes]
        total_ms = sum(duration for _, _, duration, _ in track)
        audio_ms = result.stream_bytes[sid] / 2 / result.out_rate * 1000
        assert abs(total_ms - audio_ms) <= 50, (sid, total_ms, audio_ms)
        assert track[0][1] == 0 and all(a[1] + a[2] == b[1] for a, b in zip(track, track[1:]))
        assert len({v for v, *_ in track}) >= 3  # a real lip-sync track, not one long run
    # Every expression packet of a sentence leaves before that sentence's first audio chunk.
    for name, sid in result.stream_log:
        if name in ("visemes", "mouth", "action", "sentiment", "servo_keyframes"):
            assert result.stream_log.index((name, sid)) < result.stream_log.index(("audio_chunk", sid))
    # --json events name the sentence they belong to.
    actions = [e for e in events if e["event"] == "action"]
    assert [(e["code"], e["sentence"]) for e in actions] == [
        ("social.thanks", "You are welcome."), ("farewell.goodbye", "Goodbye!")]
    assert {e["event"] for e in events} >= {"action", "sentiment", "visemes", "mouth", "servo"}


async def test_a_device_that_announces_no_expression_gets_no_expression_packets(fake_ws_gateway, fake_speak) -> None:
    audio, rate = fake_speak("Thank you.")
    result = await simulate(fake_ws_gateway, audio, rate, device_id="box-plain", speed=2.0, timeout=30,
                            capabilities=Capability.AUDIO_IN | Capability.AUDIO_OUT)
    assert result.reply_text == "You are welcome."
    assert result.expression == []


async def test_a_mouth_only_device_gets_a_few_bytes_per_sentence(fake_ws_gateway, fake_speak) -> None:
    audio, rate = fake_speak("Thank you.")
    result = await simulate(fake_ws_gateway, audio, rate, device_id="box-mouth", speed=2.0, timeout=30,
                            capabilities=Capability.AUDIO_IN | Capability.AUDIO_OUT | Capability.MOUTH)
    assert [type(m) for m in result.expression] == [Mouth]
    mouth = result.expression[0]
    assert isinstance(mouth, Mouth) and mouth.frame_ms == 40
    audio_ms = result.audio_seconds * 1000
    assert abs(len(mouth.values) * 40 - audio_ms) <= 40
    assert max(mouth.values) > 150 and min(mouth.values) == 0


async def test_a_servo_board_gets_keyframes_within_its_channel_limits(fake_ws_gateway, fake_speak) -> None:
    audio, rate = fake_speak("Thank you.")
    result = await simulate(fake_ws_gateway, audio, rate, device_id="box-servo", speed=2.0, timeout=30,
                            capabilities=Capability.AUDIO_IN | Capability.AUDIO_OUT | Capability.SERVO)
    (frames,) = [m for m in result.expression if isinstance(m, ServoKeyframes)]
    assert frames.face == "smile" and frames.led_rgb == 0xFF7F50  # affect warm
    assert all(0 <= angle <= 180 for _, angle, _ in frames.keyframes)


async def test_a_device_can_ask_for_its_own_mouth_frame_rate_with_expression_setup(fake_ws_gateway) -> None:
    from websockets.asyncio.client import connect

    from firmware_protocol import ExpressionSetup, Hello, ReplyText, TextInput, Welcome, decode, encode

    caps = Capability.AUDIO_IN | Capability.AUDIO_OUT | Capability.TEXT | Capability.MOUTH
    mouths = []
    async with connect(fake_ws_gateway) as ws:
        await ws.send(encode(Hello(device_id="jaw-e2e", capabilities=caps)))
        assert isinstance(decode(await ws.recv()), Welcome)
        await ws.send(encode(ExpressionSetup(mouth_frame_ms=100)))
        await ws.send(encode(TextInput(text="thank you")))
        while not isinstance(msg := decode(await asyncio.wait_for(ws.recv(), 30)), ReplyText) or not msg.final:
            if isinstance(msg, Mouth):
                mouths.append(msg)
    assert [m.frame_ms for m in mouths] == [100]
    assert 5 <= len(mouths[0].values) <= 30  # "You are welcome." is about 1 to 3 s long
